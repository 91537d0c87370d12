// nn::Embedding: the table and its lookup.
#include "nn/embedding.h"

#include <fmt/format.h>

#include "autograd/functions.h"
#include "nn/init.h"
#include "tensor/creation.h"

namespace accel::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, Generator& gen, double init_std)
    : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {
  if (num_embeddings <= 0 || embedding_dim <= 0)
    throw Error(fmt::format("Embedding: sizes must be positive, got num {} dim {}", num_embeddings, embedding_dim));
  weight_ = register_parameter("weight", empty({num_embeddings, embedding_dim}));
  init::normal_(weight_, 0.0, init_std, gen);
}

Tensor Embedding::forward_impl(const Tensor& indices) { return embedding(weight_, indices); }

}  // namespace accel::nn
