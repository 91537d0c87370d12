// The token shard format: the header's fields checked one by one, then the body's size and ids.
#include "runtime/llmc/token_shard.h"

#include <fmt/format.h>
#include <glob.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

#include "kernels/error.h"

namespace accel::llmc {

namespace {

int32_t header_int(std::span<const uint8_t> bytes, size_t i) {
  int32_t v = 0;
  std::memcpy(&v, bytes.data() + 4 * i, 4);  // little-endian, as llm.c writes it on x86 and ARM
  return v;
}

}  // namespace

std::vector<uint16_t> parse_token_shard(std::span<const uint8_t> bytes, const std::string& name, int64_t vocab_size) {
  constexpr size_t header_bytes = 4 * kTokenShardHeaderInts;
  if (bytes.size() < header_bytes)
    throw Error(fmt::format("read_token_shard: {}: the header is truncated ({} bytes, expected {})", name, bytes.size(),
                            header_bytes));
  if (const int32_t magic = header_int(bytes, 0); magic != kTokenShardMagic)
    throw Error(fmt::format("read_token_shard: {}: magic is {}, expected {} (an llm.c token shard)", name, magic,
                            kTokenShardMagic));
  if (const int32_t version = header_int(bytes, 1); version != kTokenShardVersion)
    throw Error(fmt::format("read_token_shard: {}: version is {}, expected {}", name, version, kTokenShardVersion));
  const int32_t count = header_int(bytes, 2);
  if (count < 0)
    throw Error(fmt::format("read_token_shard: {}: the token count is {}, expected >= 0", name, count));
  const size_t body = bytes.size() - header_bytes;
  if (body != 2 * static_cast<size_t>(count))
    throw Error(fmt::format("read_token_shard: {}: the header says {} tokens ({} bytes) but {} bytes follow it", name,
                            count, 2 * static_cast<int64_t>(count), body));
  std::vector<uint16_t> tokens(static_cast<size_t>(count));
  if (count > 0) std::memcpy(tokens.data(), bytes.data() + header_bytes, body);
  if (vocab_size > 0) {
    const auto bad = std::find_if(tokens.begin(), tokens.end(), [&](uint16_t t) { return t >= vocab_size; });
    if (bad != tokens.end())
      throw Error(fmt::format("read_token_shard: {}: token {} is id {}, expected < the vocab size {}", name,
                              bad - tokens.begin(), *bad, vocab_size));
  }
  return tokens;
}

std::vector<uint16_t> read_token_shard(const std::string& path, int64_t vocab_size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("read_token_shard: {}: cannot be opened", path));
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_token_shard(bytes, path, vocab_size);
}

std::vector<uint8_t> token_shard_bytes(const std::vector<uint16_t>& tokens) {
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw Error(fmt::format("write_token_shard: {} tokens, but the header's count is an int32", tokens.size()));
  std::vector<int32_t> header(kTokenShardHeaderInts, 0);
  header[0] = kTokenShardMagic;
  header[1] = kTokenShardVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  std::vector<uint8_t> bytes(4 * header.size() + 2 * tokens.size());
  std::memcpy(bytes.data(), header.data(), 4 * header.size());
  if (!tokens.empty()) std::memcpy(bytes.data() + 4 * header.size(), tokens.data(), 2 * tokens.size());
  return bytes;
}

void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
  const std::vector<uint8_t> bytes = token_shard_bytes(tokens);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw Error(fmt::format("write_token_shard: {}: cannot be written", path));
}

std::vector<std::string> expand_shard_pattern(const std::string& pattern) {
  glob_t g{};
  const int rc = glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> files;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) files.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  if (files.empty()) throw Error(fmt::format("expand_shard_pattern: '{}' matches no file", pattern));
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace accel::llmc
