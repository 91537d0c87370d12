// How tensor-parallel layers cut a full tensor into the ranks' parts: the size check every layer
// shares, a rank's part of a dim (of each stacked block of it), the vocab range of a rank, and the
// split of a parameter that cuts a full tensor and joins the parts again (for checkpoints), and
// where a run of a part's elements lies in the full tensor.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace accel::nn::parallel {

// size / parts, or accel::Error "layer: what N is not a multiple of the tensor-parallel size P".
int64_t divide_by_tp(const char* layer, const char* what, int64_t size, int64_t parts);

// Rank `rank` of `size`'s part of t along dim, as a new contiguous tensor with no autograd history:
// dim is `blocks` equal blocks, each cut into `size` equal parts, and the rank's parts of the blocks
// are joined in block order. t.size(dim) must be a multiple of blocks * size. A contiguous meta t
// (built under DeferredInit) gives a meta part whose values are read from t's recipe when it is
// materialised, the same elements a full init gives: a rank materialises only its part.
Tensor rank_part(const Tensor& t, int64_t dim, int64_t blocks, int rank, int size);

// The rows of a vocabulary of vocab_size that a rank owns: every rank gets per_rank rows (the vocab
// rounded up to a multiple of the group size, then divided), rank r the ids [r per_rank,
// (r + 1) per_rank); ids at or past vocab_size are padding that no token has.
struct VocabRange {
  int64_t start = 0;     // first id of the rank
  int64_t per_rank = 0;  // rows (or logit columns) every rank holds, padding included
  int64_t valid = 0;     // how many of them are real ids (< vocab_size); 0 for a rank of padding only
};
VocabRange vocab_range(int64_t vocab_size, int rank, int size);

// How a parallel layer built from a full one gets its parameters: copies of the full layer's parts
// (the full layer stays as it was), or the full layer's own tensors cut down to this rank's part in
// place (Tensor::set_data), so that an optimizer built over the full model updates the parts. A
// strategy parallelises a model that the user's optimizer already holds the second way.
enum class FromFull { copy, in_place };

// The tensor a layer registers for its part of full_param: part itself (copy), or full_param now
// holding part's data (in_place).
Tensor adopt_part(const Tensor& full_param, const Tensor& part, FromFull how);

// How one parameter of a parallel layer is cut from its full tensor: along dim, which is `blocks`
// equal blocks each cut into tp equal parts (rank_part). full_size is the full tensor's size along
// dim; with one block it may be less than the parts together, which then end in zero padding (a
// vocabulary that does not divide by tp). A parameter without a split is replicated.
struct TensorSplit {
  int64_t dim = 0;
  int64_t blocks = 1;
  int64_t full_size = 0;
};

// Rank `rank` of `size`'s part of full under split: padded with zeros to a multiple of size along dim
// when split allows it, then rank_part (a meta full: a meta part, its padding zeros). Throws
// accel::Error when full's size along dim is not split.full_size.
Tensor split_part(const Tensor& full, const TensorSplit& split, int rank, int size);

// The inverse: every rank's part, in rank order, joined into the full tensor (padding dropped).
Tensor join_parts(const std::vector<Tensor>& parts, const TensorSplit& split);

// Where a run of a part's elements lies in the full tensor: count elements of the run, from its element
// part_offset on, are elements full_offset.. of the full tensor (both row-major).
struct RunInFull {
  int64_t part_offset = 0, full_offset = 0, count = 0;
};

// The run [offset, offset + count) of rank `rank`'s part (of shape part_shape) under split, as the
// runs of the full tensor it covers, in order: one per block and index of the dims before the split
// dim that it touches, the padding dropped. For a checkpoint whose ranks save ZeRO slices of their
// tensor-parallel parts with global offsets.
std::vector<RunInFull> runs_in_full(const Shape& part_shape, const TensorSplit& split, int rank, int64_t offset,
                                    int64_t count);

}  // namespace accel::nn::parallel
