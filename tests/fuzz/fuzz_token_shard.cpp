// libFuzzer harness for llm.c's token shard reader: any bytes either parse or throw accel::Error (any
// other exception, a crash or a sanitizer report is a finding); what parses has the token count its
// size implies, every id under the vocab asked for, and survives a round trip through the writer.
#include <cstring>
#include <span>

#include "fuzz_check.h"
#include "kernels/error.h"
#include "runtime/llmc/token_shard.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  // The vocab check, on a vocab taken from the input so both outcomes are reached.
  const int64_t vocab = size > 0 ? 1 + data[size - 1] * 256 : 0;
  for (const int64_t v : {int64_t{0}, vocab}) {
    try {
      const std::vector<uint16_t> tokens = accel::llmc::parse_token_shard(bytes, "fuzz input", v);
      FUZZ_CHECK(size == 1024 + 2 * tokens.size());
      for (const uint16_t t : tokens) FUZZ_CHECK(v == 0 || t < v);
      const std::vector<uint8_t> again = accel::llmc::token_shard_bytes(tokens);
      FUZZ_CHECK(accel::llmc::parse_token_shard(again, "round trip", v) == tokens);
      // The writer's header is the input's, but for the reserved ints, which the reader ignores.
      FUZZ_CHECK(std::memcmp(again.data(), data, 12) == 0);
      FUZZ_CHECK(std::memcmp(again.data() + 1024, data + 1024, size - 1024) == 0);
    } catch (const accel::Error&) {
    }
  }
  return 0;
}
