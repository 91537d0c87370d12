// libFuzzer harness for llm.c's GPT-2 model file parser: any bytes either parse or throw accel::Error
// (any other exception, a crash or a sanitizer report is a finding); what parses has the size its
// header implies, llm.c's 16 tensors, and survives a round trip through the writer byte for byte, but
// for the reserved header ints, which the reader ignores.
#include <cstring>
#include <span>

#include "fuzz_check.h"
#include "kernels/error.h"
#include "runtime/llmc/gpt2_model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace accel::llmc;
  const std::span<const uint8_t> bytes(data, size);
  try {
    const Gpt2ModelFile model = parse_gpt2_model(bytes, "fuzz input");
    FUZZ_CHECK(model.header.file_bytes() == size);
    FUZZ_CHECK(model.tensors.size() == model.header.tensor_shapes().size());
    const std::vector<uint8_t> again = gpt2_model_bytes(model);
    FUZZ_CHECK(again.size() == size);
    FUZZ_CHECK(std::memcmp(again.data(), data, 32) == 0);  // magic, version and the six sizes
    FUZZ_CHECK(std::memcmp(again.data() + kModelFileHeaderBytes, data + kModelFileHeaderBytes,
                           size - kModelFileHeaderBytes) == 0);
    FUZZ_CHECK(parse_gpt2_model(again, "round trip").header.version() == model.header.version());
  } catch (const accel::Error&) {
  }
  return 0;
}
