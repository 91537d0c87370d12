// VocabParallelEmbedding: this rank's rows, the masked local lookup and g.
#include "nn/parallel/vocab_parallel_embedding.h"

#include <fmt/format.h>

#include "autograd/functions.h"
#include "nn/parallel/tp_mappings.h"
#include "tensor/creation.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"

namespace accel::nn::parallel {

VocabParallelEmbedding::VocabParallelEmbedding(int64_t num_embeddings, int64_t embedding_dim, Communicator& tp,
                                               Generator& gen, const EmbeddingOptions& options)
    : VocabParallelEmbedding(Embedding(num_embeddings, embedding_dim, gen, options), tp, FromFull::copy) {}

VocabParallelEmbedding::VocabParallelEmbedding(const Embedding& full, Communicator& tp, FromFull how)
    : num_embeddings_(full.num_embeddings()), range_(vocab_range(full.num_embeddings(), tp.rank(), tp.size())),
      tp_(&tp) {
  const TensorSplit split = parameter_splits()[0].second;
  weight_ = register_parameter("weight",
                               adopt_part(full.weight(), split_part(full.weight(), split, tp.rank(), tp.size()), how));
  if (const auto p = full.padding_idx(); p && *p >= range_.start && *p < range_.start + range_.valid)
    padding_idx_ = *p - range_.start;
}

std::shared_ptr<VocabParallelEmbedding> VocabParallelEmbedding::from_full(const Embedding& full, Communicator& tp,
                                                                          FromFull how) {
  return std::shared_ptr<VocabParallelEmbedding>(new VocabParallelEmbedding(full, tp, how));
}

std::vector<std::pair<std::string, TensorSplit>> VocabParallelEmbedding::parameter_splits() const {
  return {{"weight", TensorSplit{.dim = 0, .blocks = 1, .full_size = num_embeddings_}}};
}

Tensor VocabParallelEmbedding::forward_impl(const Tensor& ids) {
  if (ids.dtype() != DType::i64 && ids.dtype() != DType::i32)
    throw Error(fmt::format("VocabParallelEmbedding: ids must be i64 or i32, got {} {}", dtype_name(ids.dtype()),
                            shape_str(ids.shape())));
  // A rank sees only its own range, so an id no rank owns would silently read as zeros: refuse it here.
  if (ids.numel() > 0) {
    const double lowest = nograd::min(ids).item(), highest = nograd::max(ids).item();
    if (lowest < 0 || highest >= static_cast<double>(num_embeddings_))
      throw Error(fmt::format("VocabParallelEmbedding: ids must be in [0, {}), got ids from {} to {}",
                              num_embeddings_, lowest, highest));
  }
  // Each id's row here, clamped into the table; ids of other ranks (whose clamped row differs from
  // their own offset) read row 0 or the last and are zeroed after the lookup.
  const Tensor offset = nograd::sub(ids, static_cast<double>(range_.start));
  auto id_scalar = [&](int64_t v) { return scalar_tensor(static_cast<double>(v), ids.dtype(), ids.device()); };
  const Tensor row = nograd::maximum(nograd::minimum(offset, id_scalar(range_.valid - 1)), id_scalar(0));
  const Tensor others = nograd::unsqueeze(nograd::ne(row, offset), -1);
  const Tensor local = masked_fill(embedding(weight_, row, padding_idx_), others, 0.0);
  return reduce_from_tp_region(local, *tp_);
}

}  // namespace accel::nn::parallel
