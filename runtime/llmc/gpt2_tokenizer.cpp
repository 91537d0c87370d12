// The tokenizer file: the header's fields checked one by one, then each token's length and bytes.
#include "runtime/llmc/gpt2_tokenizer.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "kernels/error.h"

namespace accel::llmc {

namespace {

uint32_t header_uint(std::span<const uint8_t> bytes, size_t i) {
  uint32_t v = 0;
  std::memcpy(&v, bytes.data() + 4 * i, 4);  // little-endian, as llm.c writes it
  return v;
}

// The header's fields into tokenizer; returns the vocab size, checked against what can follow.
uint32_t parse_header(std::span<const uint8_t> bytes, const std::string& where, Gpt2Tokenizer& tokenizer) {
  if (bytes.size() < kTokenizerHeaderBytes)
    throw Error(fmt::format("{}: the header is truncated ({} bytes, expected {})", where, bytes.size(),
                            kTokenizerHeaderBytes));
  if (const uint32_t magic = header_uint(bytes, 0); magic != kTokenizerMagic)
    throw Error(fmt::format("{}: magic is {}, expected {} (an llm.c GPT-2 tokenizer)", where, magic, kTokenizerMagic));
  tokenizer.version = header_uint(bytes, 1);
  if (tokenizer.version != 1 && tokenizer.version != 2)
    throw Error(fmt::format("{}: version is {}, expected 1 or 2", where, tokenizer.version));
  const uint32_t vocab = header_uint(bytes, 2);
  if (vocab == 0) throw Error(fmt::format("{}: vocab_size is 0, expected > 0", where));
  // Every token takes at least two bytes (its length, then >= 1 byte): refuse before allocating.
  const uint64_t body = bytes.size() - kTokenizerHeaderBytes;
  if (2 * static_cast<uint64_t>(vocab) > body)
    throw Error(fmt::format("{}: vocab_size is {}, which needs at least {} bytes of tokens, but {} follow the header "
                            "(truncated)",
                            where, vocab, 2 * static_cast<uint64_t>(vocab), body));
  if (tokenizer.version == 2) {
    const uint32_t eot = header_uint(bytes, 3);
    if (eot >= vocab)
      throw Error(fmt::format("{}: eot_token is {}, expected < vocab_size {}", where, eot, vocab));
    tokenizer.eot_token = eot;
  } else {
    tokenizer.eot_token = kGpt2EndOfText < vocab ? kGpt2EndOfText : -1;
  }
  return vocab;
}

}  // namespace

const std::string& Gpt2Tokenizer::decode(int64_t id) const {
  if (id < 0 || id >= vocab_size())
    throw Error(fmt::format("Gpt2Tokenizer::decode: token id {} is outside the table, expected 0 to {}", id,
                            vocab_size() - 1));
  return pieces[static_cast<size_t>(id)];
}

std::string Gpt2Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  for (const int64_t id : ids) text += decode(id);
  return text;
}

Gpt2Tokenizer parse_gpt2_tokenizer(std::span<const uint8_t> bytes, const std::string& name) {
  const std::string where = "read_gpt2_tokenizer: " + name;
  Gpt2Tokenizer tokenizer;
  const uint32_t vocab = parse_header(bytes, where, tokenizer);
  tokenizer.pieces.reserve(vocab);
  size_t at = kTokenizerHeaderBytes;
  for (uint32_t id = 0; id < vocab; ++id) {
    if (at >= bytes.size())
      throw Error(fmt::format("{}: token {} is truncated (the file ends before its length; vocab_size is {})", where,
                              id, vocab));
    const size_t length = bytes[at++];
    if (length == 0) throw Error(fmt::format("{}: token {} has length 0, expected >= 1", where, id));
    if (bytes.size() - at < length)
      throw Error(fmt::format("{}: token {} is truncated (length {}, but {} bytes are left)", where, id, length,
                              bytes.size() - at));
    tokenizer.pieces.emplace_back(reinterpret_cast<const char*>(bytes.data() + at), length);
    at += length;
  }
  if (at != bytes.size())
    throw Error(fmt::format("{}: {} bytes follow the last of its {} tokens, expected none", where, bytes.size() - at,
                            vocab));
  return tokenizer;
}

Gpt2Tokenizer read_gpt2_tokenizer(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("read_gpt2_tokenizer: {}: cannot be opened", path));
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_gpt2_tokenizer(bytes, path);
}

std::vector<uint8_t> gpt2_tokenizer_bytes(const Gpt2Tokenizer& tokenizer) {
  const char* where = "write_gpt2_tokenizer";
  if (tokenizer.version != 1 && tokenizer.version != 2)
    throw Error(fmt::format("{}: version is {}, expected 1 or 2", where, tokenizer.version));
  if (tokenizer.pieces.empty() || tokenizer.pieces.size() > UINT32_MAX)
    throw Error(fmt::format("{}: {} tokens, expected 1 to {}", where, tokenizer.pieces.size(), UINT32_MAX));
  if (tokenizer.version == 2 && (tokenizer.eot_token < 0 || tokenizer.eot_token >= tokenizer.vocab_size()))
    throw Error(fmt::format("{}: eot_token is {}, expected 0 to {}", where, tokenizer.eot_token,
                            tokenizer.vocab_size() - 1));
  std::vector<uint32_t> header(kTokenizerHeaderInts, 0);
  header[0] = kTokenizerMagic;
  header[1] = tokenizer.version;
  header[2] = static_cast<uint32_t>(tokenizer.pieces.size());
  if (tokenizer.version == 2) header[3] = static_cast<uint32_t>(tokenizer.eot_token);
  std::vector<uint8_t> bytes(kTokenizerHeaderBytes);
  std::memcpy(bytes.data(), header.data(), kTokenizerHeaderBytes);
  for (size_t id = 0; id < tokenizer.pieces.size(); ++id) {
    const std::string& piece = tokenizer.pieces[id];
    if (piece.empty() || piece.size() > 255)
      throw Error(fmt::format("{}: token {} has {} bytes, expected 1 to 255 (its length is one byte)", where, id,
                              piece.size()));
    bytes.push_back(static_cast<uint8_t>(piece.size()));
    bytes.insert(bytes.end(), piece.begin(), piece.end());
  }
  return bytes;
}

void write_gpt2_tokenizer(const std::string& path, const Gpt2Tokenizer& tokenizer) {
  const std::vector<uint8_t> bytes = gpt2_tokenizer_bytes(tokenizer);
  const std::string temp = path + ".tmp";
  std::error_code ec;
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::filesystem::remove(temp, ec);
      throw Error(fmt::format("write_gpt2_tokenizer: {}: cannot be written", path));
    }
  }
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(temp, ec);
    throw Error(fmt::format("write_gpt2_tokenizer: {}: cannot be renamed into place: {}", path, why));
  }
}

}  // namespace accel::llmc
