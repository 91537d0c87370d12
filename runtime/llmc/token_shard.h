// llm.c's token shard files (dev/data/*.bin): a header of 256 little-endian int32 (magic 20240520,
// version 1, the token count, the rest 0), then that many uint16 token ids. Read and written here,
// with every field checked, so a hostile or truncated file is an accel::Error naming it and the field.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace accel::llmc {

inline constexpr int32_t kTokenShardMagic = 20240520;
inline constexpr int32_t kTokenShardVersion = 1;
inline constexpr size_t kTokenShardHeaderInts = 256;

// The tokens of a shard's bytes; name says where they came from in errors. vocab_size > 0 also
// checks every id against it (a model's embedding would read out of bounds); 0 checks none.
std::vector<uint16_t> parse_token_shard(std::span<const uint8_t> bytes, const std::string& name, int64_t vocab_size = 0);
std::vector<uint16_t> read_token_shard(const std::string& path, int64_t vocab_size = 0);
// The file bytes of a shard holding tokens (at most INT32_MAX of them, the header's limit).
std::vector<uint8_t> token_shard_bytes(const std::vector<uint16_t>& tokens);
void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens);

// The files a glob pattern names, sorted, as llm.c's loader takes them (train_*.bin); an Error when
// it names none.
std::vector<std::string> expand_shard_pattern(const std::string& pattern);

}  // namespace accel::llmc
