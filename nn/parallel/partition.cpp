// Partitioning a full tensor across the tensor-parallel ranks.
#include "nn/parallel/partition.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "kernels/fnv1a.h"
#include "tensor/creation.h"
#include "tensor/deferred_init.h"
#include "tensor/meta_tensor.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"

namespace accel::nn::parallel {

int64_t divide_by_tp(const char* layer, const char* what, int64_t size, int64_t parts) {
  if (parts <= 0 || size % parts != 0)
    throw Error(fmt::format("{}: {} {} is not a multiple of the tensor-parallel size {}", layer, what, size, parts));
  return size / parts;
}

namespace {

int64_t padded_size(const TensorSplit& split, int size) {
  const int64_t unit = split.blocks * size;
  return (split.full_size + unit - 1) / unit * unit;
}

// Rank `rank`'s part of full, a contiguous meta tensor (a model built under DeferredInit), as a meta
// tensor whose values are read from full's recipe when it is materialised: each run of the part from
// the runs of full it covers, the padding zeros. So a rank materialises only its part (under ZeRO 3
// only its slices of it), to the values the same elements of a full init have.
Tensor meta_part(const Tensor& full, const TensorSplit& split, int rank, int size) {
  Shape shape = full.shape();
  shape[static_cast<size_t>(split.dim)] = padded_size(split, size) / size;
  const Tensor part = make_meta("split_part", shape, full.dtype(), full.device());
  // A handle of its own on full's storage: the caller may give full's handle the part's data.
  const Tensor source_tensor = nograd::view(full, full.shape());
  auto source = std::make_shared<ElementSource>();
  source->read = [source_tensor, split, rank, shape](int64_t first, int64_t count) {
    DeferredInit off(false);
    Tensor out = zeros({count}, source_tensor.dtype());
    for (const RunInFull& run : runs_in_full(shape, split, rank, first, count))
      materialize_run(source_tensor, run.full_offset, nograd::narrow(out, 0, run.part_offset, run.count));
    return out;
  };
  Fnv1a fingerprint(full.storage()->recipe()->fingerprint());
  for (const int64_t v : {split.dim, split.blocks, split.full_size, int64_t{rank}, int64_t{size}, full.offset()})
    fingerprint.word(static_cast<uint64_t>(v));
  source->fingerprint = fingerprint.value();
  source->description =
      fmt::format("tensor-parallel part {} of {} of a deferred-init {}", rank, size, shape_str(full.shape()));
  record_fill(part, FillRecipe::from_source(std::move(source)));
  return part;
}

}  // namespace

Tensor rank_part(const Tensor& t, int64_t dim, int64_t blocks, int rank, int size) {
  const bool cuts = blocks > 0 && size > 0 && t.size(dim) % (blocks * size) == 0;
  if (!cuts || rank < 0 || rank >= size)
    throw Error(fmt::format("rank_part: dim {} of {} does not cut into {} blocks of {} parts (rank {})", dim,
                            shape_str(t.shape()), blocks, size, rank));
  if (t.is_meta() && t.is_contiguous())
    return meta_part(t, {.dim = dim, .blocks = blocks, .full_size = t.size(dim)}, rank, size);
  const int64_t block = t.size(dim) / blocks, part = block / size;
  std::vector<Tensor> pieces;
  for (int64_t b = 0; b < blocks; ++b) pieces.push_back(nograd::narrow(t, dim, b * block + rank * part, part));
  return pieces.size() == 1 ? nograd::clone(pieces[0]) : nograd::cat(pieces, dim);
}

VocabRange vocab_range(int64_t vocab_size, int rank, int size) {
  if (vocab_size <= 0 || size <= 0 || rank < 0 || rank >= size)
    throw Error(fmt::format("vocab_range: needs a positive vocab and a rank of the group, got vocab {}, rank {} of {}",
                            vocab_size, rank, size));
  VocabRange range;
  range.per_rank = (vocab_size + size - 1) / size;
  range.start = rank * range.per_rank;
  range.valid = std::clamp<int64_t>(vocab_size - range.start, 0, range.per_rank);
  return range;
}

Tensor adopt_part(const Tensor& full_param, const Tensor& part, FromFull how) {
  if (how == FromFull::copy) return part;
  full_param.set_data(part);
  return full_param;
}

Tensor split_part(const Tensor& full, const TensorSplit& split, int rank, int size) {
  if (split.dim < 0 || split.dim >= full.dim() || full.size(split.dim) != split.full_size)
    throw Error(fmt::format("split_part: the full tensor is {}, expected size {} along dim {}",
                            shape_str(full.shape()), split.full_size, split.dim));
  const int64_t padded = padded_size(split, size);
  if (padded == split.full_size) return rank_part(full, split.dim, split.blocks, rank, size);
  if (split.blocks != 1)
    throw Error(fmt::format("split_part: size {} along dim {} does not cut into {} blocks of {} parts",
                            split.full_size, split.dim, split.blocks, size));
  if (rank < 0 || rank >= size)
    throw Error(fmt::format("split_part: rank {} of a group of {}", rank, size));
  if (full.is_meta() && full.is_contiguous()) return meta_part(full, split, rank, size);
  Shape shape = full.shape();
  shape[static_cast<size_t>(split.dim)] = padded;
  Tensor with_padding = zeros(shape, full.dtype(), full.device());
  nograd::copy_(nograd::narrow(with_padding, split.dim, 0, split.full_size), full);
  return rank_part(with_padding, split.dim, 1, rank, size);
}

Tensor join_parts(const std::vector<Tensor>& parts, const TensorSplit& split) {
  if (parts.empty()) throw Error("join_parts: no parts");
  const int64_t part = parts[0].size(split.dim) / split.blocks;
  std::vector<Tensor> pieces;
  for (int64_t b = 0; b < split.blocks; ++b)
    for (const Tensor& p : parts) pieces.push_back(nograd::narrow(p, split.dim, b * part, part));
  const Tensor joined = nograd::cat(pieces, split.dim);
  if (joined.size(split.dim) < split.full_size)
    throw Error(fmt::format("join_parts: {} parts of {} hold {} along dim {}, less than the full size {}",
                            parts.size(), shape_str(parts[0].shape()), joined.size(split.dim), split.dim,
                            split.full_size));
  return joined.size(split.dim) == split.full_size ? joined
                                                   : nograd::clone(nograd::narrow(joined, split.dim, 0, split.full_size));
}

std::vector<RunInFull> runs_in_full(const Shape& part_shape, const TensorSplit& split, int rank, int64_t offset,
                                    int64_t count) {
  const auto dim = static_cast<size_t>(split.dim);
  int64_t inner = 1;
  for (size_t d = dim + 1; d < part_shape.size(); ++d) inner *= part_shape[d];
  const int64_t part_rows = part_shape.at(dim), per_block = part_rows / split.blocks;
  const int64_t full_block = split.full_size / split.blocks;
  // Of a block's per_block rows in this part, those before the padding.
  const int64_t valid_rows = std::clamp<int64_t>(full_block - rank * per_block, 0, per_block);
  const int64_t chunk = per_block * inner;  // one block's rows of one outer index: contiguous in both
  std::vector<RunInFull> out;
  if (chunk == 0) return out;
  for (int64_t e = offset, end = offset + count; e < end;) {
    const int64_t index = e / chunk, outer = index / split.blocks, block = index % split.blocks;
    const int64_t chunk_start = index * chunk, chunk_end = std::min(end, chunk_start + chunk);
    const int64_t valid_end = std::min(chunk_end, chunk_start + valid_rows * inner);
    if (e < valid_end) {
      const int64_t full_row = block * full_block + rank * per_block;
      const int64_t full_start = (outer * split.full_size + full_row) * inner + (e - chunk_start);
      out.push_back({e - offset, full_start, valid_end - e});
    }
    e = chunk_end;
  }
  return out;
}

}  // namespace accel::nn::parallel
