// libFuzzer harness for the safetensors reader: any bytes either parse or throw accel::Error (any
// other exception, a crash or a sanitizer report is a finding), and what parses survives a round trip
// through the writer and, written to a file, through load_safetensors.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <string>

#include "fuzz_check.h"
#include "kernels/error.h"
#include "runtime/safetensors.h"

namespace {

accel::NamedTensors by_name(accel::NamedTensors t) {
  std::sort(t.begin(), t.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  return t;
}

// The same names, shapes, dtypes and bytes, whatever the order (the writer sorts by dtype size, then name).
bool same_contents(const accel::SafetensorsContents& first, const accel::SafetensorsContents& second) {
  const accel::NamedTensors a = by_name(first.tensors), b = by_name(second.tensors);
  if (first.metadata != second.metadata || a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const accel::Tensor &x = a[i].second, &y = b[i].second;
    if (a[i].first != b[i].first || x.shape() != y.shape() || x.dtype() != y.dtype() ||
        x.nbytes() != y.nbytes() || (x.nbytes() > 0 && std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) != 0))
      return false;
  }
  return true;
}

// The path reader, on the same bytes written to a file.
accel::SafetensorsContents load_through_file(std::span<const uint8_t> bytes) {
  char path[] = "/tmp/accel_fuzz_safetensors_XXXXXX";
  const int fd = mkstemp(path);
  FUZZ_CHECK(fd >= 0);
  FUZZ_CHECK(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  close(fd);
  try {
    accel::SafetensorsContents out = accel::load_safetensors(path);
    unlink(path);
    return out;
  } catch (...) {
    unlink(path);
    throw;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  accel::SafetensorsContents parsed;
  try {
    parsed = accel::from_safetensors_bytes({data, size});
  } catch (const accel::Error&) {
    return 0;  // refused, as it should be
  }
  // Accepted: the writer must reproduce it, and the path reader must agree.
  const std::vector<uint8_t> rewritten = accel::to_safetensors_bytes(parsed.tensors, parsed.metadata);
  FUZZ_CHECK(same_contents(parsed, accel::from_safetensors_bytes(rewritten)));
  FUZZ_CHECK(same_contents(parsed, load_through_file({data, size})));
  return 0;
}
