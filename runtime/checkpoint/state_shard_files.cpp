// Per-rank shard files of split state: a part cut into the pieces that are ranges of the full tensor
// (one per block of a fused split, or one run of elements; the padding left out), and the full tensors
// put back together, every element filled exactly once.
#include "runtime/checkpoint/state_shard_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <variant>
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

// A piece's place in its full tensor: rows [offset, offset + r) along dim (a split part), or, when
// elements, elements [offset, offset + n) of the full tensor flattened (a run).
struct Piece {
  bool elements = false;
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

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// The pieces of one entry of a shard, with the metadata of each, added to tensors and pieces.
void add_pieces(const StateShard& shard, size_t i, nn::StateDict& tensors, json& pieces) {
  const auto& [name, t] = shard.local[i];
  if (const auto* split = std::get_if<nn::parallel::TensorSplit>(&shard.places[i])) {
    Shape full = t.shape();
    full[static_cast<size_t>(split->dim)] = split->full_size;
    for (const auto& [offset, start, rows] : ranges(*split, t.size(split->dim), shard.part)) {
      if (rows == 0) continue;  // a part of padding only
      const std::string key = fmt::format("{}@{}", name, offset);
      tensors.emplace_back(key, nograd::contiguous(nograd::narrow(t, split->dim, start, rows)));
      pieces[key] = {{"name", name}, {"dim", split->dim}, {"offset", offset}, {"full_shape", full}};
    }
    return;
  }
  const ElementRun& run = std::get<ElementRun>(shard.places[i]);
  if (t.dim() != 1 || run.offset < 0 || run.offset + t.numel() > numel_of(run.full_shape))
    throw Error(fmt::format("state_shard_file: '{}' is a run of {} elements at offset {} of a full tensor {}; a run "
                            "must be 1-D and lie within its full tensor",
                            name, shape_str(t.shape()), run.offset, shape_str(run.full_shape)));
  if (t.numel() == 0) return;  // this part holds none of it
  const std::string key = fmt::format("{}@{}", name, run.offset);
  tensors.emplace_back(key, nograd::contiguous(t));
  pieces[key] = {{"name", name}, {"element_offset", run.offset}, {"full_shape", run.full_shape}};
}

std::vector<std::string> index_files(const fs::path& index) {
  try {
    const json j = json::parse(read_checkpoint_text(index));
    return j.at("files").get<std::vector<std::string>>();
  } catch (const json::exception& e) {
    throw Error(fmt::format("load_state: {}: not a shard index ({})", index.string(), e.what()));
  }
}

constexpr int64_t kWhole = -1;     // Assembly::dim of a tensor written whole
constexpr int64_t kElements = -2;  // ... of one put together from element runs, or from cuts of several dims

// A full tensor being put together: the runs of its flattened elements the pieces filled (disjoint;
// start -> end, adjacent ones merged), and the dim every piece cut, for the message when some are missing.
struct Assembly {
  Tensor full;
  int64_t dim = kWhole;
  std::map<int64_t, int64_t> runs;
  int64_t filled = 0;  // elements
};

// Whether the piece t lies inside a full tensor of where.full.
bool fits(const Tensor& t, const Piece& where) {
  if (where.elements) return t.dim() == 1 && where.offset >= 0 && where.offset + t.numel() <= numel_of(where.full);
  if (where.dim < 0 || where.dim >= t.dim() || t.dim() != static_cast<int64_t>(where.full.size())) return false;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (d != where.dim && t.size(d) != where.full[static_cast<size_t>(d)]) return false;
  return where.offset >= 0 && where.offset + t.size(where.dim) <= where.full[static_cast<size_t>(where.dim)];
}

// The runs of the full tensor's flattened elements that the piece covers: one for an element run, one
// per index of the dims before the cut one for rows along a dim.
std::vector<std::pair<int64_t, int64_t>> covered_runs(const Tensor& t, const Piece& where) {
  if (where.elements) return {{where.offset, where.offset + t.numel()}};
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < where.dim; ++d) outer *= where.full[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(where.dim) + 1; d < where.full.size(); ++d) inner *= where.full[d];
  const int64_t size = where.full[static_cast<size_t>(where.dim)], rows = t.size(where.dim);
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t o = 0; o < outer; ++o) out.emplace_back((o * size + where.offset) * inner, (o * size + where.offset + rows) * inner);
  return out;
}

// Marks [start, end) filled; false when part of it was filled already.
bool fill(Assembly& a, int64_t start, int64_t end) {
  if (start == end) return true;
  auto next = a.runs.upper_bound(start);
  if (next != a.runs.end() && next->first < end) return false;
  if (next != a.runs.begin() && std::prev(next)->second > start) return false;
  a.filled += end - start;
  if (next != a.runs.begin() && std::prev(next)->second == start) {
    start = std::prev(next)->first;
    a.runs.erase(std::prev(next));
  }
  if (next != a.runs.end() && next->first == end) {
    end = next->second;
    a.runs.erase(next);
  }
  a.runs[start] = end;
  return true;
}

void place(Assembly& a, const Tensor& piece, const Piece& where, const std::string& name, const std::string& file) {
  const std::string at = where.elements ? fmt::format("elements {} to {}", where.offset, where.offset + piece.numel())
                                        : fmt::format("offset {} of dim {}", where.offset, where.dim);
  if (a.dim == kWhole && a.full.defined())
    throw Error(fmt::format("load_state: {}: '{}' is stored whole in one shard file and in pieces in another", file,
                            name));
  if (!a.full.defined()) a.full = zeros(where.full, piece.dtype(), Device::cpu()), a.dim = where.elements ? kElements : where.dim;
  if (a.full.shape() != where.full || a.full.dtype() != piece.dtype() || !fits(piece, where))
    throw Error(fmt::format("load_state: {}: the piece of '{}' at {} ({} {}) does not fit its full tensor {} {}", file,
                            name, at, dtype_name(piece.dtype()), shape_str(piece.shape()), dtype_name(a.full.dtype()),
                            shape_str(a.full.shape())));
  for (const auto& [start, end] : covered_runs(piece, where))
    if (!fill(a, start, end))
      throw Error(fmt::format("load_state: {}: the piece of '{}' at {} overlaps another piece of it; is a shard file "
                              "repeated?",
                              file, name, at));
  if (where.elements) {
    nograd::copy_(nograd::narrow(nograd::view(a.full, {a.full.numel()}), 0, where.offset, piece.numel()), piece);
  } else {
    nograd::copy_(nograd::narrow(a.full, where.dim, where.offset, piece.size(where.dim)), piece);
  }
  if (where.elements || a.dim != where.dim) a.dim = kElements;
}

// The place of piece `key` from a file's metadata.
Piece piece_of(const json& p) {
  if (p.contains("element_offset"))
    return {true, 0, p.at("element_offset").get<int64_t>(), p.at("full_shape").get<Shape>()};
  return {false, p.at("dim").get<int64_t>(), p.at("offset").get<int64_t>(), p.at("full_shape").get<Shape>()};
}

// What is missing when the pieces did not fill a full tensor: rows along the dim they all cut, else elements.
std::string missing_message(const Assembly& a, const std::string& name, const fs::path& index) {
  const int64_t numel = a.full.numel();
  if (a.dim >= 0) {
    const int64_t rows = a.full.size(a.dim), per_row = numel / std::max<int64_t>(rows, 1);
    return fmt::format("load_state: {}: the shard files hold {} of the {} rows of '{}' along dim {}; a shard file is "
                       "missing",
                       index.string(), a.filled / std::max<int64_t>(per_row, 1), rows, name, a.dim);
  }
  return fmt::format("load_state: {}: the shard files hold {} of the {} elements of '{}'; a shard file is missing",
                     index.string(), a.filled, numel, name);
}

}  // namespace

std::string state_shard_file_name(const std::string& stem, int part, int parts) {
  return fmt::format("{}.shard-{:05d}-of-{:05d}.safetensors", stem, part + 1, parts);
}

std::pair<nn::StateDict, SafetensorsMetadata> state_shard_file(const StateShard& shard) {
  if (shard.places.size() != shard.local.size())
    throw Error(fmt::format("state_shard_file: {} places for {} tensors; one per tensor expected", shard.places.size(),
                            shard.local.size()));
  nn::StateDict tensors;
  json pieces = json::object(), order = json::array();
  for (size_t i = 0; i < shard.local.size(); ++i) {
    const auto& [name, t] = shard.local[i];
    order.push_back(name);
    if (std::holds_alternative<std::monostate>(shard.places[i])) {
      if (shard.part == 0) tensors.emplace_back(name, t);  // whole: one copy is enough
      continue;
    }
    add_pieces(shard, i, tensors, pieces);
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
        else if (assembled[key].dim != kWhole)
          throw Error(fmt::format("load_state: {}: '{}' is stored whole here and in pieces in another shard file",
                                  file.string(), key));
        assembled[key] = {t, kWhole, {}, 0};
        continue;
      }
      std::string whole;
      Piece where;
      try {
        const json& p = pieces[key];
        whole = p.at("name").get<std::string>();
        where = piece_of(p);
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
    if (a.dim != kWhole && a.filled != a.full.numel())
      throw Error(missing_message(a, name, dir / state_shard_index_name(stem)));
    state.emplace_back(name, a.full);
  }
  return state;
}

}  // namespace accel
