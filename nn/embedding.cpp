// nn::Embedding: the table and its lookup.
#include "nn/embedding.h"

#include <fmt/format.h>

#include "autograd/functions.h"
#include "nn/init.h"
#include "tensor/creation.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/nn_ops.h"
#include "tensor/nograd/views.h"

namespace accel::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, Generator& gen, double init_std)
    : Embedding(num_embeddings, embedding_dim, gen, EmbeddingOptions{.init_std = init_std}) {}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, Generator& gen, const EmbeddingOptions& options)
    : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {
  if (num_embeddings <= 0 || embedding_dim <= 0)
    throw Error(fmt::format("Embedding: sizes must be positive, got num {} dim {}", num_embeddings, embedding_dim));
  if (options.padding_idx)
    padding_idx_ = nograd::normalize_padding_idx("Embedding", *options.padding_idx, num_embeddings);
  weight_ = register_parameter("weight", empty({num_embeddings, embedding_dim}));
  init::normal_(weight_, 0.0, options.init_std, gen);
  if (padding_idx_) init::zeros_(nograd::select(weight_, 0, *padding_idx_));
}

Tensor Embedding::forward_impl(const Tensor& indices) { return embedding(weight_, indices, padding_idx_); }

}  // namespace accel::nn
