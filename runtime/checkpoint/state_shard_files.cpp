// Per-rank shard files of split state: a part cut into the pieces that are ranges of the full tensor
// (one per block of a fused split, or one run of elements; the padding left out) or a run of a part,
// and the full tensors put back together, every element filled exactly once.
#include "runtime/checkpoint/state_shard_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <functional>
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

// A piece's place in its full tensor: rows [offset, offset + r) along dim (a split part); elements
// [offset, offset + n) of the full tensor flattened (a run); or elements [offset, offset + n) of part
// `part` (part_rows along dim) of the full tensor split along dim in `blocks` fused blocks (a part run).
enum class PieceKind { rows, elements, part_run };
struct Piece {
  PieceKind kind = PieceKind::elements;
  int64_t dim = 0, offset = 0;
  Shape full;
  int64_t blocks = 1, part = 0, part_rows = 0;  // a part run's
};

Shape part_shape(const Piece& where) {
  Shape shape = where.full;
  shape[static_cast<size_t>(where.dim)] = where.part_rows;
  return shape;
}

Piece piece_of_run(const PartRun& run) {
  if (run.split.dim < 0 || run.split.dim >= static_cast<int64_t>(run.part_shape.size()))
    throw Error(fmt::format("state_shard_file: a part run split along dim {} of a part {}; a dim of the part expected",
                            run.split.dim, shape_str(run.part_shape)));
  const auto dim = static_cast<size_t>(run.split.dim);
  Shape full = run.part_shape;
  full[dim] = run.split.full_size;
  return {PieceKind::part_run, run.split.dim, run.offset, std::move(full), run.split.blocks, run.part, run.part_shape[dim]};
}

bool fits(const Shape& piece, const Piece& where);

// One place per tensor, and a written_elsewhere flag per tensor or none.
void check_entries(const char* who, const StateShard& shard) {
  if (shard.places.size() != shard.local.size())
    throw Error(fmt::format("{}: {} places for {} tensors; one per tensor expected", who, shard.places.size(),
                            shard.local.size()));
  if (!shard.written_elsewhere.empty() && shard.written_elsewhere.size() != shard.local.size())
    throw Error(fmt::format("{}: {} written_elsewhere flags for {} tensors; one per tensor or none expected", who,
                            shard.written_elsewhere.size(), shard.local.size()));
}

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
  if (const auto* run = std::get_if<PartRun>(&shard.places[i])) {
    const Piece where = piece_of_run(*run);
    if (!fits(t.shape(), where))
      throw Error(fmt::format("state_shard_file: '{}' is a run of {} elements at offset {} of part {} {} of a full "
                              "tensor {}; a run must be 1-D and lie within its part",
                              name, shape_str(t.shape()), run->offset, run->part, shape_str(run->part_shape),
                              shape_str(where.full)));
    if (t.numel() == 0) return;
    const std::string key = fmt::format("{}@{}.{}", name, where.part, where.offset);
    tensors.emplace_back(key, nograd::contiguous(t));
    pieces[key] = {{"name", name},
                   {"element_offset", where.offset},
                   {"full_shape", where.full},
                   {"part_of", {{"dim", where.dim}, {"blocks", where.blocks}, {"part", where.part}, {"rows", where.part_rows}}}};
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

// A piece of a full tensor and where its elements come from: a shard file's entry, or a tensor in memory.
struct PieceSource {
  Piece where;
  Shape shape;  // the piece's own
  DType dtype = DType::f32;
  std::string origin;  // the file, for messages
  std::function<Tensor(int64_t first, int64_t count)> read;  // the piece's flattened elements
};

// A full tensor's pieces, and the runs of its flattened elements they cover (disjoint; start -> end,
// adjacent ones merged), and the dim every piece cut, for the message when some are missing.
constexpr int64_t kElements = -1;  // Pieces::dim of runs of elements, or cuts of several dims
struct Pieces {
  StateEntry entry;
  bool whole = false;  // one piece that is the whole tensor
  int64_t dim = kElements;
  std::map<int64_t, int64_t> runs;
  int64_t filled = 0;  // elements
  std::vector<PieceSource> sources;
};

// Whether the piece lies inside a full tensor of where.full (whose dims are checked: piece_of). The
// comparisons subtract, so that no offset a file gives can overflow them.
bool fits(const Shape& piece, const Piece& where) {
  const int64_t rank = static_cast<int64_t>(piece.size());
  auto run_fits = [&](int64_t numel) {
    return rank == 1 && where.offset >= 0 && piece[0] <= numel && where.offset <= numel - piece[0];
  };
  if (where.kind == PieceKind::elements) return run_fits(numel_of(where.full));
  if (where.kind == PieceKind::part_run) {
    // Each of the part's blocks no larger than the full tensor's (so the part's size cannot overflow),
    // and its rows starting within the block.
    if (where.dim < 0 || where.dim >= static_cast<int64_t>(where.full.size()) || where.blocks < 1) return false;
    const int64_t size = where.full[static_cast<size_t>(where.dim)];
    if (size % where.blocks != 0 || where.part_rows < 0 || where.part_rows % where.blocks != 0) return false;
    const int64_t full_block = size / where.blocks, per_block = where.part_rows / where.blocks;
    if (per_block > full_block || where.part < 0 || where.part > (per_block == 0 ? 0 : full_block / per_block) ||
        where.part > std::numeric_limits<int>::max())
      return false;
    return run_fits(numel_of(part_shape(where)));
  }
  if (where.dim < 0 || where.dim >= rank || rank != static_cast<int64_t>(where.full.size())) return false;
  for (int64_t d = 0; d < rank; ++d)
    if (d != where.dim && piece[static_cast<size_t>(d)] != where.full[static_cast<size_t>(d)]) return false;
  const int64_t rows = piece[static_cast<size_t>(where.dim)], size = where.full[static_cast<size_t>(where.dim)];
  return where.offset >= 0 && rows <= size && where.offset <= size - rows;
}

// The runs of the full tensor's flattened elements that the piece covers, each with where it starts in
// the piece's own flattened elements: one for an element run, one per index of the dims before the cut
// one for rows along a dim.
struct CoveredRun {
  int64_t start, end, piece_start;
};
std::vector<CoveredRun> covered_runs(const PieceSource& p) {
  const Piece& where = p.where;
  if (where.kind == PieceKind::elements) return {{where.offset, where.offset + numel_of(p.shape), 0}};
  if (where.kind == PieceKind::part_run) {
    const nn::parallel::TensorSplit split{.dim = where.dim, .blocks = where.blocks,
                                          .full_size = where.full[static_cast<size_t>(where.dim)]};
    std::vector<CoveredRun> out;
    for (const nn::parallel::RunInFull& r : nn::parallel::runs_in_full(part_shape(where), split, static_cast<int>(where.part),
                                                                       where.offset, numel_of(p.shape)))
      out.push_back({r.full_offset, r.full_offset + r.count, r.part_offset});
    return out;
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < where.dim; ++d) outer *= where.full[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(where.dim) + 1; d < where.full.size(); ++d) inner *= where.full[d];
  const int64_t size = where.full[static_cast<size_t>(where.dim)], rows = p.shape[static_cast<size_t>(where.dim)];
  if (rows == 0 || inner == 0) return {};  // an empty piece covers nothing (however many its outer dims)
  std::vector<CoveredRun> out;
  for (int64_t o = 0; o < outer; ++o)
    out.push_back({(o * size + where.offset) * inner, (o * size + where.offset + rows) * inner, o * rows * inner});
  return out;
}

// Marks [start, end) filled; false when part of it was filled already.
bool fill(Pieces& a, int64_t start, int64_t end) {
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

// Adds a piece of the full tensor `name` to a, checking that it fits and overlaps no other piece.
void add_piece(Pieces& a, const std::string& name, PieceSource piece, bool whole) {
  const Piece& where = piece.where;
  const int64_t count = numel_of(piece.shape);
  // The run's end as text: an offset from a file can be so large that offset + count overflows.
  const std::string end = where.offset <= std::numeric_limits<int64_t>::max() - count
                              ? std::to_string(where.offset + count)
                              : fmt::format("{} + {}", where.offset, count);
  const std::string at = whole ? std::string("whole")
                         : where.kind == PieceKind::elements ? fmt::format("elements {} to {}", where.offset, end)
                         : where.kind == PieceKind::part_run
                             ? fmt::format("elements {} to {} of part {} along dim {}", where.offset, end, where.part, where.dim)
                             : fmt::format("offset {} of dim {}", where.offset, where.dim);
  if (!a.sources.empty() && a.whole && whole) return;  // a tensor held whole by several parts: one copy is enough
  if (!a.sources.empty() && (a.whole || whole))
    throw Error(fmt::format("load_state: {}: '{}' is stored whole in one shard file and in pieces in another",
                            piece.origin, name));
  if (a.sources.empty()) {
    a.entry = {name, where.full, piece.dtype};
    a.whole = whole;
    a.dim = where.kind == PieceKind::rows ? where.dim : kElements;
  }
  if (a.entry.shape != where.full || a.entry.dtype != piece.dtype || !fits(piece.shape, where))
    throw Error(fmt::format("load_state: {}: the piece of '{}' at {} ({} {}) does not fit its full tensor {} {}",
                            piece.origin, name, at, dtype_name(piece.dtype), shape_str(piece.shape),
                            dtype_name(a.entry.dtype), shape_str(a.entry.shape)));
  for (const CoveredRun& run : covered_runs(piece))
    if (!fill(a, run.start, run.end))
      throw Error(fmt::format("load_state: {}: the piece of '{}' at {} overlaps another piece of it; is a shard file "
                              "repeated?",
                              piece.origin, name, at));
  if (where.kind != PieceKind::rows || a.dim != where.dim) a.dim = kElements;
  a.sources.push_back(std::move(piece));
}

// What is missing when the pieces did not fill a full tensor: rows along the dim they all cut, else elements.
std::string missing_message(const Pieces& a, const fs::path& index) {
  const int64_t numel = numel_of(a.entry.shape);
  if (a.dim >= 0) {
    const int64_t rows = a.entry.shape[static_cast<size_t>(a.dim)], per_row = numel / std::max<int64_t>(rows, 1);
    return fmt::format("load_state: {}: the shard files hold {} of the {} rows of '{}' along dim {}; a shard file is "
                       "missing",
                       index.string(), a.filled / std::max<int64_t>(per_row, 1), rows, a.entry.name, a.dim);
  }
  return fmt::format("load_state: {}: the shard files hold {} of the {} elements of '{}'; a shard file is missing",
                     index.string(), a.filled, numel, a.entry.name);
}

// A full state over pieces: a read takes from each piece only the elements it asks for.
class PiecesReader final : public StateReader {
 public:
  PiecesReader(std::vector<Pieces> tensors, std::string holder) : tensors_(std::move(tensors)), holder_(std::move(holder)) {
    std::vector<StateEntry> entries;
    for (const Pieces& a : tensors_) entries.push_back(a.entry);
    set_entries(std::move(entries));
  }

 private:
  Tensor read_range(size_t i, int64_t first, int64_t count) const override {
    NoGradGuard no_grad;
    const Pieces& a = tensors_[i];
    const int64_t last = first + count;
    // Per piece, the parts of [first, last) it holds: (where in the piece, where in the result, how many).
    struct Part {
      int64_t piece_at, out_at, n;
    };
    std::vector<std::pair<const PieceSource*, std::vector<Part>>> parts;
    int64_t found = 0;
    for (const PieceSource& p : a.sources) {
      std::vector<Part> mine;
      for (const CoveredRun& run : covered_runs(p)) {
        const int64_t lo = std::max(run.start, first), hi = std::min(run.end, last);
        if (lo < hi) mine.push_back({run.piece_start + lo - run.start, lo - first, hi - lo}), found += hi - lo;
      }
      if (!mine.empty()) parts.emplace_back(&p, std::move(mine));
    }
    if (found != count)
      throw Error(fmt::format("{}: elements {} to {} of '{}' are not all held here ({} of {}); a reader of one "
                              "rank's shard holds only that rank's runs",
                              holder_, first, last, a.entry.name, found, count));
    if (parts.size() == 1 && parts[0].second.size() == 1)  // one run of one piece: no copy
      return parts[0].first->read(parts[0].second[0].piece_at, count);
    Tensor out;
    for (const auto& [piece, runs] : parts) {
      // One read over the span of this piece's runs, then each run copied to its place.
      const int64_t lo = runs.front().piece_at, hi = runs.back().piece_at + runs.back().n;
      const Tensor span = piece->read(lo, hi - lo);
      if (!out.defined()) out = empty({count}, a.entry.dtype, span.device());
      for (const Part& r : runs) nograd::copy_(nograd::narrow(out, 0, r.out_at, r.n), nograd::narrow(span, 0, r.piece_at - lo, r.n));
    }
    return out.defined() ? out : empty({0}, a.entry.dtype, Device::cpu());
  }

  std::vector<Pieces> tensors_;
  std::string holder_;
};

// A piece's elements, for a tensor in memory.
std::function<Tensor(int64_t, int64_t)> elements_of(Tensor t) {
  return [t = std::move(t)](int64_t first, int64_t count) {
    return nograd::narrow(nograd::view(nograd::contiguous(t), {t.numel()}), 0, first, count);
  };
}

// The order to read in: the saved order when it names exactly the tensors found, else the order they
// were found in.
std::vector<Pieces> in_order(std::map<std::string, Pieces> found, std::vector<std::string> order,
                             const std::vector<std::string>& saved_order) {
  std::vector<std::string> sorted_saved = saved_order, sorted_found = order;
  std::sort(sorted_saved.begin(), sorted_saved.end());
  std::sort(sorted_found.begin(), sorted_found.end());
  if (sorted_saved == sorted_found) order = saved_order;
  std::vector<Pieces> out;
  for (const std::string& name : order) out.push_back(std::move(found.at(name)));
  return out;
}

// An integer of a piece's place, named what in the error. A float, which nlohmann would truncate (and
// convert with undefined behaviour past int64), or an integer past int64 is refused.
int64_t integer_value(const json& v, const std::string& what, const std::string& file, const std::string& key) {
  const bool fits = v.is_number_integer() &&
                    (!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t{std::numeric_limits<int64_t>::max()});
  if (!fits)
    throw Error(fmt::format("load_state: {}: piece '{}' has {} {}; an integer that int64 holds expected", file, key,
                            what, v.dump()));
  return v.get<int64_t>();
}

// object.at throws where the field is missing (the caller names the piece).
int64_t integer_of(const json& object, const char* field, const std::string& file, const std::string& key) {
  return integer_value(object.at(field), field, file, key);
}

Shape shape_of(const json& object, const char* field, const std::string& file, const std::string& key) {
  const json& dims = object.at(field);
  if (!dims.is_array())
    throw Error(fmt::format("load_state: {}: piece '{}' has {} {}; an array of dims expected", file, key, field,
                            dims.dump()));
  Shape shape;
  for (size_t i = 0; i < dims.size(); ++i)
    shape.push_back(integer_value(dims[i], fmt::format("{} dim {}", field, i), file, key));
  return shape;
}

// The place of a piece from a file's metadata; a full shape with a negative dim, or more elements
// than int64 counts, throws.
Piece piece_of(const json& p, const std::string& file, const std::string& key) {
  Piece where;
  where.full = shape_of(p, "full_shape", file, key);
  if (p.contains("part_of")) {
    const json& part = p.at("part_of");
    where.kind = PieceKind::part_run;
    where.dim = integer_of(part, "dim", file, key);
    where.blocks = integer_of(part, "blocks", file, key);
    where.part = integer_of(part, "part", file, key);
    where.part_rows = integer_of(part, "rows", file, key);
    where.offset = integer_of(p, "element_offset", file, key);
  } else if (p.contains("element_offset")) {
    where.offset = integer_of(p, "element_offset", file, key);
  } else {
    where.kind = PieceKind::rows;
    where.dim = integer_of(p, "dim", file, key);
    where.offset = integer_of(p, "offset", file, key);
  }
  bool counts = std::all_of(where.full.begin(), where.full.end(), [](int64_t d) { return d >= 0; });
  try {
    shape_numel(where.full);
  } catch (const Error&) {
    counts = false;
  }
  if (!counts)
    throw Error(fmt::format("load_state: {}: piece '{}' has the full shape {}; dims of at least 0 whose product "
                            "int64 counts expected",
                            file, key, shape_str(where.full)));
  return where;
}

// The pieces of one shard file, from its header and its metadata, added to found (and their names to order).
void add_file_pieces(const fs::path& file, std::map<std::string, Pieces>& found, std::vector<std::string>& order,
                     std::vector<std::string>& saved_order) {
  const SafetensorsHeader header = load_safetensors_header(file.string());
  json pieces = json::object();
  try {
    if (const auto it = header.metadata.find(kPiecesKey); it != header.metadata.end()) pieces = json::parse(it->second);
    if (const auto it = header.metadata.find(kOrderKey); it != header.metadata.end() && saved_order.empty())
      saved_order = json::parse(it->second).get<std::vector<std::string>>();
  } catch (const json::exception& e) {
    throw Error(fmt::format("load_state: {}: bad '{}' metadata ({})", file.string(), kPiecesKey, e.what()));
  }
  for (const SafetensorsEntry& entry : header.tensors) {
    PieceSource source{{PieceKind::elements, 0, 0, entry.shape}, entry.shape, entry.dtype, file.string(),
                       [path = file.string(), entry](int64_t first, int64_t count) {
                         return read_safetensors_elements(path, entry, first, count);
                       }};
    std::string whole = entry.name;
    const bool is_piece = pieces.contains(entry.name);
    if (is_piece) {
      try {
        const json& p = pieces[entry.name];
        whole = p.at("name").get<std::string>();
        source.where = piece_of(p, file.string(), entry.name);
      } catch (const json::exception& e) {
        throw Error(fmt::format("load_state: {}: the place of piece '{}' is not valid ({})", file.string(), entry.name,
                                e.what()));
      }
    } else {
      source.where.full = entry.shape;
      source.shape = {numel_of(entry.shape)};  // whole: one run of all its elements
    }
    if (!found.count(whole)) order.push_back(whole);
    add_piece(found[whole], whole, std::move(source), !is_piece);
  }
}

}  // namespace

std::string state_shard_file_name(const std::string& stem, int part, int parts) {
  return fmt::format("{}.shard-{:05d}-of-{:05d}.safetensors", stem, part + 1, parts);
}

std::pair<nn::StateDict, SafetensorsMetadata> state_shard_file(const StateShard& shard) {
  check_entries("state_shard_file", shard);
  nn::StateDict tensors;
  json pieces = json::object(), order = json::array();
  std::set<std::string> ordered;  // a tensor in several runs (a ZeRO slice of a tensor-parallel part) is named once
  for (size_t i = 0; i < shard.local.size(); ++i) {
    const auto& [name, t] = shard.local[i];
    if (ordered.insert(name).second) order.push_back(name);
    if (!shard.written_elsewhere.empty() && shard.written_elsewhere[i]) continue;
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

std::unique_ptr<StateReader> open_state_shards(const fs::path& dir, const std::string& stem) {
  const fs::path index = dir / state_shard_index_name(stem);
  std::map<std::string, Pieces> found;
  std::vector<std::string> order, saved_order;  // as found; as the strategy held them (part 0's metadata)
  for (const std::string& name : index_files(index)) add_file_pieces(dir / name, found, order, saved_order);
  std::vector<Pieces> tensors = in_order(std::move(found), std::move(order), saved_order);
  for (const Pieces& a : tensors)
    if (a.filled != numel_of(a.entry.shape)) throw Error(missing_message(a, index));
  return std::make_unique<PiecesReader>(std::move(tensors), index.string());
}

std::unique_ptr<StateReader> state_shard_reader(const StateShard& shard) {
  check_entries("state_shard_reader", shard);
  std::map<std::string, Pieces> found;
  std::vector<std::string> order;
  const std::string holder = fmt::format("the state of rank {} of {}", shard.part, shard.parts);
  for (size_t i = 0; i < shard.local.size(); ++i) {
    const auto& [name, t] = shard.local[i];
    PieceSource source{{PieceKind::elements, 0, 0, t.shape()}, {t.numel()}, t.dtype(), holder, elements_of(t)};
    bool whole = true;
    if (const auto* split = std::get_if<nn::parallel::TensorSplit>(&shard.places[i])) {
      // The whole part is one run of its elements, the padding of a part past full_size included.
      source.where = piece_of_run(PartRun{*split, shard.part, t.shape(), 0});
      whole = false;
    } else if (const auto* run = std::get_if<ElementRun>(&shard.places[i])) {
      source.where = {PieceKind::elements, 0, run->offset, run->full_shape};
      whole = false;
    } else if (const auto* part_run = std::get_if<PartRun>(&shard.places[i])) {
      source.where = piece_of_run(*part_run);
      whole = false;
    }
    if (!found.count(name)) order.push_back(name);
    add_piece(found[name], name, std::move(source), whole);
  }
  return std::make_unique<PiecesReader>(in_order(std::move(found), order, order), holder);
}

nn::StateDict read_state_shards(const fs::path& dir, const std::string& stem) {
  return open_state_shards(dir, stem)->read_all();
}

}  // namespace accel
