// libFuzzer harness for llm.c's GPT-2 tokenizer parser: any bytes either parse or throw accel::Error
// (any other exception, a crash or a sanitizer report is a finding); what parses has vocab_size
// pieces of 1 to 255 bytes, an eot id inside the table or none, decodes every id, and survives a round
// trip through the writer byte for byte, but for the header ints the reader ignores.
#include <cstring>
#include <span>

#include "fuzz_check.h"
#include "kernels/error.h"
#include "runtime/llmc/gpt2_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace accel::llmc;
  const std::span<const uint8_t> bytes(data, size);
  try {
    const Gpt2Tokenizer tokenizer = parse_gpt2_tokenizer(bytes, "fuzz input");
    FUZZ_CHECK(tokenizer.vocab_size() > 0);
    FUZZ_CHECK(tokenizer.eot_token >= -1 && tokenizer.eot_token < tokenizer.vocab_size());
    size_t body = 0;
    for (int64_t id = 0; id < tokenizer.vocab_size(); ++id) {
      const std::string& piece = tokenizer.decode(id);
      FUZZ_CHECK(!piece.empty() && piece.size() <= 255);
      body += 1 + piece.size();
    }
    FUZZ_CHECK(size == kTokenizerHeaderBytes + body);
    const std::vector<uint8_t> again = gpt2_tokenizer_bytes(tokenizer);
    FUZZ_CHECK(again.size() == size);
    // Magic, version and vocab_size; version 2's eot too.
    FUZZ_CHECK(std::memcmp(again.data(), data, tokenizer.version == 2 ? 16 : 12) == 0);
    FUZZ_CHECK(std::memcmp(again.data() + kTokenizerHeaderBytes, data + kTokenizerHeaderBytes, body) == 0);
    FUZZ_CHECK(parse_gpt2_tokenizer(again, "round trip").pieces == tokenizer.pieces);
  } catch (const accel::Error&) {
  }
  return 0;
}
