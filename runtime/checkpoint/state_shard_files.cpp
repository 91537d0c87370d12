// Per-rank shard files of split state: a part cut into the pieces that are ranges of the full tensor
// (one per block of a fused split, the padding left out), and the full tensors put back together.
#include "runtime/checkpoint/state_shard_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "autograd/grad_mode.h"
#include "runtime/checkpoint/checkpoint_dir.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"

namespace accel {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kPiecesKey = "accel_pieces";  // the metadata entry with every piece's place
constexpr const char* kOrderKey = "accel_order";    // the full state's names in order (safetensors sorts keys)

struct Piece {
  int64_t dim = 0, offset = 0;
  Shape full;
};

// Part `part` of `parts` of a tensor split as `split`, as (offset in the full tensor, rows of the part,
// rows written) per block: the padding past split.full_size is not written.
std::vector<std::tuple<int64_t, int64_t, int64_t>> ranges(const nn::parallel::TensorSplit& split, int64_t part_rows,
                                                          int part) {
  const int64_t per_block = part_rows / split.blocks, full_block = split.full_size / split.blocks;
  std::vector<std::tuple<int64_t, int64_t, int64_t>> out;
  for (int64_t b = 0; b < split.blocks; ++b) {
    const int64_t offset = b * full_block + part * per_block;
    const int64_t rows = std::clamp<int64_t>((b + 1) * full_block - offset, 0, per_block);
    out.emplace_back(offset, b * per_block, rows);
  }
  return out;
}

std::vector<std::string> index_files(const fs::path& index) {
  try {
    const json j = json::parse(read_checkpoint_text(index));
    return j.at("files").get<std::vector<std::string>>();
  } catch (const json::exception& e) {
    throw Error(fmt::format("load_state: {}: not a shard index ({})", index.string(), e.what()));
  }
}

// A full tensor being put together, and how many of its rows along dim the pieces filled.
struct Assembly {
  Tensor full;
  int64_t dim = -1, filled = 0;  // dim -1: written whole
};

void place(Assembly& a, const Tensor& piece, const Piece& where, const std::string& name, const std::string& file) {
  if (!a.full.defined()) a.full = zeros(where.full, piece.dtype(), Device::cpu()), a.dim = where.dim;
  const bool fits = a.full.shape() == where.full && where.dim == a.dim && where.dim >= 0 &&
                    where.dim < piece.dim() && where.offset >= 0 &&
                    where.offset + piece.size(where.dim) <= where.full[static_cast<size_t>(where.dim)];
  if (!fits)
    throw Error(fmt::format("load_state: {}: the piece of '{}' at offset {} of dim {} ({}) does not fit its full "
                            "tensor {}",
                            file, name, where.offset, where.dim, shape_str(piece.shape()), shape_str(where.full)));
  nograd::copy_(nograd::narrow(a.full, where.dim, where.offset, piece.size(where.dim)), piece);
  a.filled += piece.size(where.dim);
}

}  // namespace

std::string state_shard_file_name(const std::string& stem, int part, int parts) {
  return fmt::format("{}.shard-{:05d}-of-{:05d}.safetensors", stem, part + 1, parts);
}

std::pair<nn::StateDict, SafetensorsMetadata> state_shard_file(const StateShard& shard) {
  nn::StateDict tensors;
  json pieces = json::object(), order = json::array();
  for (size_t i = 0; i < shard.local.size(); ++i) {
    const auto& [name, t] = shard.local[i];
    order.push_back(name);
    const std::optional<nn::parallel::TensorSplit>& split = shard.splits[i];
    if (!split) {
      if (shard.part == 0) tensors.emplace_back(name, t);  // whole: one copy is enough
      continue;
    }
    Shape full = t.shape();
    full[static_cast<size_t>(split->dim)] = split->full_size;
    for (const auto& [offset, start, rows] : ranges(*split, t.size(split->dim), shard.part)) {
      if (rows == 0) continue;  // a part of padding only
      const std::string key = fmt::format("{}@{}", name, offset);
      tensors.emplace_back(key, nograd::contiguous(nograd::narrow(t, split->dim, start, rows)));
      pieces[key] = {{"name", name}, {"dim", split->dim}, {"offset", offset}, {"full_shape", full}};
    }
  }
  return {std::move(tensors), {{"format", "pt"}, {kPiecesKey, pieces.dump()}, {kOrderKey, order.dump()}}};
}

std::string state_shard_index_name(const std::string& stem) { return stem + ".shards.json"; }

std::string state_shard_index(const std::string& stem, int parts) {
  std::vector<std::string> files;
  for (int p = 0; p < parts; ++p) files.push_back(state_shard_file_name(stem, p, parts));
  return json{{"files", files}}.dump(2) + "\n";
}

nn::StateDict read_state_shards(const fs::path& dir, const std::string& stem) {
  NoGradGuard no_grad;
  std::vector<std::string> order;  // names in the first file's order
  std::vector<std::string> saved_order;  // as the strategy held them, from the first file's metadata
  std::map<std::string, Assembly> assembled;
  for (const std::string& name : index_files(dir / state_shard_index_name(stem))) {
    const fs::path file = dir / name;
    SafetensorsContents contents = load_safetensors(file.string());
    json pieces = json::object();
    try {
      if (const auto it = contents.metadata.find(kPiecesKey); it != contents.metadata.end()) pieces = json::parse(it->second);
      if (const auto it = contents.metadata.find(kOrderKey); it != contents.metadata.end() && saved_order.empty())
        saved_order = json::parse(it->second).get<std::vector<std::string>>();
    } catch (const json::exception& e) {
      throw Error(fmt::format("load_state: {}: bad '{}' metadata ({})", file.string(), kPiecesKey, e.what()));
    }
    for (auto& [key, t] : contents.tensors) {
      if (!pieces.contains(key)) {
        if (!assembled.count(key)) order.push_back(key);
        assembled[key] = {t, -1, 0};
        continue;
      }
      std::string whole;
      Piece where;
      try {
        const json& p = pieces[key];
        whole = p.at("name").get<std::string>();
        where = {p.at("dim").get<int64_t>(), p.at("offset").get<int64_t>(), p.at("full_shape").get<Shape>()};
      } catch (const json::exception& e) {
        throw Error(fmt::format("load_state: {}: the place of piece '{}' is not valid ({})", file.string(), key,
                                e.what()));
      }
      if (!assembled.count(whole)) order.push_back(whole);
      place(assembled[whole], t, where, whole, file.string());
    }
  }
  // The saved order when it names exactly the tensors found, else the order they were found in.
  std::vector<std::string> sorted_saved = saved_order, sorted_found = order;
  std::sort(sorted_saved.begin(), sorted_saved.end());
  std::sort(sorted_found.begin(), sorted_found.end());
  if (sorted_saved == sorted_found) order = saved_order;
  nn::StateDict state;
  for (const std::string& name : order) {
    const Assembly& a = assembled[name];
    if (a.dim >= 0 && a.filled != a.full.size(a.dim))
      throw Error(fmt::format("load_state: {}: the shard files hold {} of the {} rows of '{}' along dim {}; a shard "
                              "file is missing or repeated",
                              (dir / state_shard_index_name(stem)).string(), a.filled, a.full.size(a.dim), name, a.dim));
    state.emplace_back(name, a.full);
  }
  return state;
}

}  // namespace accel
