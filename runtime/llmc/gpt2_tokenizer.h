// llm.c's GPT-2 tokenizer file (gpt2_tokenizer.bin, as train_gpt2.py's write_tokenizer writes it): a
// header of 256 little-endian uint32 (magic 20240328, version 1 or 2, vocab_size, and with version 2
// the end-of-text id; the rest 0), then per token id one uint8 length and that many bytes. Read with
// every field checked, so that decoding a sample's ids needs no Python and no download.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace accel::llmc {

inline constexpr uint32_t kTokenizerMagic = 20240328;
inline constexpr size_t kTokenizerHeaderInts = 256;
inline constexpr size_t kTokenizerHeaderBytes = 4 * kTokenizerHeaderInts;
// Version 1 has no eot field: llm.c takes GPT-2's, 50256.
inline constexpr int64_t kGpt2EndOfText = 50256;

struct Gpt2Tokenizer {
  uint32_t version = 2;             // 1 or 2
  std::vector<std::string> pieces;  // by token id: its bytes (GPT-2's byte-level BPE, not always whole UTF-8)
  int64_t eot_token = -1;           // the end-of-text id; -1 when a version 1 table is too short to hold 50256

  int64_t vocab_size() const { return static_cast<int64_t>(pieces.size()); }
  // The bytes of one id, or of ids one after another. Throws naming the id and the vocab size when an
  // id is outside the table.
  const std::string& decode(int64_t id) const;
  std::string decode(const std::vector<int64_t>& ids) const;
};

// The tokenizer of a file's bytes; name says where they came from in errors
// ("read_gpt2_tokenizer: FILE: token 7 has length 0, expected >= 1").
Gpt2Tokenizer parse_gpt2_tokenizer(std::span<const uint8_t> bytes, const std::string& name);
Gpt2Tokenizer read_gpt2_tokenizer(const std::string& path);
// The file bytes of a tokenizer (its version; every piece 1 to 255 bytes; version 2's eot_token in the
// table); written whole to a temporary file renamed over path.
std::vector<uint8_t> gpt2_tokenizer_bytes(const Gpt2Tokenizer& tokenizer);
void write_gpt2_tokenizer(const std::string& path, const Gpt2Tokenizer& tokenizer);

}  // namespace accel::llmc
