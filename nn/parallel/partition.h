// How tensor-parallel layers cut a full tensor into the ranks' parts: the size check every layer
// shares, a rank's part of a dim (of each stacked block of it), and the vocab range of a rank.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace accel::nn::parallel {

// size / parts, or accel::Error "layer: what N is not a multiple of the tensor-parallel size P".
int64_t divide_by_tp(const char* layer, const char* what, int64_t size, int64_t parts);

// Rank `rank` of `size`'s part of t along dim, as a new contiguous tensor with no autograd history:
// dim is `blocks` equal blocks, each cut into `size` equal parts, and the rank's parts of the blocks
// are joined in block order. t.size(dim) must be a multiple of blocks * size.
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

}  // namespace accel::nn::parallel
