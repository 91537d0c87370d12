// accelerator_state.json and the shard index: nlohmann's parser, then every field checked by hand,
// because its own exceptions name neither the file nor what was expected.
#include "runtime/checkpoint/checkpoint_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "accel_config.h"
#include "kernels/error.h"

namespace accel {

namespace {

using json = nlohmann::json;

json parse_json(std::string_view text, const std::string& source) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw Error(fmt::format("load_state: {}: not JSON: {}", source, e.what()));
  }
}

const json& member(const json& object, const char* key, const std::string& source) {
  if (!object.is_object() || !object.contains(key))
    throw Error(fmt::format("load_state: {}: '{}' is missing", source, key));
  return object.at(key);
}

// An integer field in [lo, hi]; where the key is absent, fallback (when given). nlohmann keeps a
// non-negative number as unsigned and a negative one as signed.
template <class T>
T integer(const json& object, const char* key, const std::string& source, int64_t lo, uint64_t hi,
          std::optional<T> fallback = std::nullopt) {
  if (fallback && (!object.is_object() || !object.contains(key))) return *fallback;
  const json& v = member(object, key, source);
  bool fits = false;
  int64_t s = 0;
  uint64_t u = 0;
  if (v.is_number_unsigned()) {
    u = v.get<uint64_t>();
    fits = u <= hi && (lo <= 0 || u >= static_cast<uint64_t>(lo));
  } else if (v.is_number_integer()) {
    s = v.get<int64_t>();
    fits = s >= lo && (s < 0 || static_cast<uint64_t>(s) <= hi);
  }
  if (!fits)
    throw Error(fmt::format("load_state: {}: '{}' is {}, expected an integer from {} to {}", source, key, v.dump(), lo,
                            hi));
  return v.is_number_unsigned() ? static_cast<T>(u) : static_cast<T>(s);
}

template <class T>
T integer_or(const json& object, const char* key, const std::string& source, int64_t lo, uint64_t hi, T fallback) {
  return integer<T>(object, key, source, lo, hi, fallback);
}

constexpr int64_t kMaxI64 = std::numeric_limits<int64_t>::max();
constexpr uint64_t kMaxInt = std::numeric_limits<int>::max();
constexpr uint64_t kMaxU64 = std::numeric_limits<uint64_t>::max();

}  // namespace

SavedCheckpointState parse_checkpoint_state(std::string_view text, const std::string& source) {
  const json state = parse_json(text, source);
  if (!state.is_object()) throw Error(fmt::format("load_state: {}: expected a JSON object, got {}", source, state.type_name()));
  SavedCheckpointState s;
  s.format = integer_or<int>(state, "format", source, std::numeric_limits<int>::min(), kMaxInt, 0);
  if (s.format < 1 || s.format > kCheckpointFormat)
    throw Error(fmt::format("load_state: {}: format {} is not one this accel ({}) reads (1 to {}); a newer accel "
                            "wrote it",
                            source, s.format, ACCEL_VERSION, kCheckpointFormat));
  s.world_size = integer_or<int>(state, "world_size", source, 1, kMaxInt, 1);
  s.models = integer_or<uint64_t>(state, "models", source, 0, kMaxU64, 0);
  s.optimizers = integer_or<uint64_t>(state, "optimizers", source, 0, kMaxU64, 0);
  s.objects = integer_or<uint64_t>(state, "objects", source, 0, kMaxU64, 0);
  s.generators = integer_or<uint64_t>(state, "generators", source, 0, kMaxU64, 0);
  s.completed_steps = integer_or<int64_t>(state, "completed_steps", source, 0, kMaxI64, 0);
  const json& loaders = member(state, "loaders", source);
  if (!loaders.is_array())
    throw Error(fmt::format("load_state: {}: 'loaders' is {}, expected an array", source, loaders.type_name()));
  for (const json& l : loaders)
    s.loaders.push_back({integer<int64_t>(l, "epoch", source, 0, kMaxI64), integer<int64_t>(l, "samples_seen", source, 0, kMaxI64)});
  const json& acc = member(state, "accumulation", source);
  s.micro_step = integer<int64_t>(acc, "micro_step", source, 0, kMaxI64);
  s.batches_seen = integer<uint64_t>(acc, "batches_seen", source, 0, kMaxU64);
  s.batches = integer<uint64_t>(acc, "batches", source, 0, kMaxU64);
  return s;
}

std::vector<std::string> parse_shard_index(std::string_view text, const std::string& source) {
  const json index = parse_json(text, source);
  const json& map = member(index, "weight_map", source);
  if (!map.is_object())
    throw Error(fmt::format("load_state: {}: 'weight_map' is {}, expected an object", source, map.type_name()));
  std::vector<std::string> files;
  for (const auto& [name, file] : map.items()) {
    if (!file.is_string())
      throw Error(fmt::format("load_state: {}: weight_map['{}'] is {}, expected a file name", source, name, file.dump()));
    const std::string f = file.get<std::string>();
    if (f.empty() || f == "." || f == ".." || f.find('/') != std::string::npos || f.find('\0') != std::string::npos)
      throw Error(fmt::format("load_state: {}: weight_map['{}'] is '{}', expected a file name in the checkpoint "
                              "directory (no '/')",
                              source, name, f));
    if (std::find(files.begin(), files.end(), f) == files.end()) files.push_back(f);
  }
  return files;
}

}  // namespace accel
