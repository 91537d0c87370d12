// nn::Embedding: a lookup table of num_embeddings rows of size embedding_dim.
#pragma once

#include <optional>

#include "nn/module.h"
#include "tensor/generator.h"

namespace accel::nn {

struct EmbeddingOptions {
  double init_std = 1.0;
  // A row that is read like any other but never learns (PyTorch's padding_idx): it starts at 0 and gets
  // no grad. Negative counts from the end.
  std::optional<int64_t> padding_idx = std::nullopt;
};

class Embedding : public Module {
 public:
  // weight [num, dim] is drawn from N(0, init_std^2): PyTorch's N(0, 1) by default; GPT passes 0.02.
  Embedding(int64_t num_embeddings, int64_t embedding_dim, Generator& gen, double init_std = 1.0);
  // Embedding(num, dim, gen, {.padding_idx = 0}); the draws are the same, then the padding row is zeroed.
  Embedding(int64_t num_embeddings, int64_t embedding_dim, Generator& gen, const EmbeddingOptions& options);

  std::string type_name() const override { return "Embedding"; }

  int64_t num_embeddings() const { return num_embeddings_; }
  int64_t embedding_dim() const { return embedding_dim_; }
  const Tensor& weight() const { return weight_; }
  // In [0, num_embeddings) when set.
  std::optional<int64_t> padding_idx() const { return padding_idx_; }

 protected:
  // Integer indices of any shape -> indices.shape + [dim].
  Tensor forward_impl(const Tensor& indices) override;

 private:
  int64_t num_embeddings_, embedding_dim_;
  std::optional<int64_t> padding_idx_;
  Tensor weight_;
};

}  // namespace accel::nn
