// Partitioning a full tensor across the tensor-parallel ranks.
#include "nn/parallel/partition.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"

namespace accel::nn::parallel {

int64_t divide_by_tp(const char* layer, const char* what, int64_t size, int64_t parts) {
  if (parts <= 0 || size % parts != 0)
    throw Error(fmt::format("{}: {} {} is not a multiple of the tensor-parallel size {}", layer, what, size, parts));
  return size / parts;
}

Tensor rank_part(const Tensor& t, int64_t dim, int64_t blocks, int rank, int size) {
  const bool cuts = blocks > 0 && size > 0 && t.size(dim) % (blocks * size) == 0;
  if (!cuts || rank < 0 || rank >= size)
    throw Error(fmt::format("rank_part: dim {} of {} does not cut into {} blocks of {} parts (rank {})", dim,
                            shape_str(t.shape()), blocks, size, rank));
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

}  // namespace accel::nn::parallel
