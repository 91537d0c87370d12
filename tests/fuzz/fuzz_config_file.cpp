// libFuzzer harness for the config file parser: any text either parses or throws accel::Error (any
// other exception, a crash or a sanitizer report is a finding), and what parses is written back by
// to_yaml as text that parses to the same config.
#include <string>

#include "fuzz_check.h"
#include "kernels/error.h"
#include "runtime/config_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  accel::ConfigFile config;
  try {
    config = accel::parse_config(text, "fuzz.yaml");
  } catch (const accel::Error&) {
    return 0;  // refused, as it should be
  }
  const std::string written = accel::to_yaml(config);
  accel::ConfigFile again;
  try {
    again = accel::parse_config(written, "written.yaml");
  } catch (const accel::Error& e) {
    std::fprintf(stderr, "to_yaml wrote a config parse_config refuses: %s\n%s\n", e.what(), written.c_str());
    std::abort();
  }
  FUZZ_CHECK(again == config);
  return 0;
}
