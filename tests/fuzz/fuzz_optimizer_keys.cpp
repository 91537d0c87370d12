// libFuzzer harness for the named optimizer-state keys of a checkpoint. The input is lines: "p NAME"
// names the optimizer's next parameter, any other line is a key of optimizer.safetensors.
// index_optimizer_state either maps the keys or throws accel::Error (anything else is a finding), and
// name_optimizer_state maps what it returns back to the same keys.
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "kernels/error.h"
#include "runtime/checkpoint/named_optimizer_state.h"
#include "tensor/creation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const accel::Tensor value = accel::scalar_tensor(1.0, accel::DType::f32);
  std::vector<std::string> names;
  accel::optim::StateDict by_name;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (!rest.empty()) {
    const size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    if (line.starts_with("p ")) names.emplace_back(line.substr(2));
    else by_name.emplace_back(std::string(line), value);
  }
  accel::optim::StateDict by_index;
  try {
    by_index = accel::index_optimizer_state(by_name, names, "optimizer.safetensors");
  } catch (const accel::Error&) {
    return 0;
  }
  const accel::optim::StateDict back = accel::name_optimizer_state(by_index, names);
  FUZZ_CHECK(back.size() == by_name.size());
  for (size_t i = 0; i < back.size(); ++i) FUZZ_CHECK(back[i].first == by_name[i].first);
  return 0;
}
