// nn::Embedding: a lookup table of num_embeddings rows of size embedding_dim.
#pragma once

#include "nn/module.h"
#include "tensor/generator.h"

namespace accel::nn {

class Embedding : public Module {
 public:
  // weight [num, dim] is drawn from N(0, init_std^2): PyTorch's N(0, 1) by default; GPT passes 0.02.
  Embedding(int64_t num_embeddings, int64_t embedding_dim, Generator& gen, double init_std = 1.0);

  std::string type_name() const override { return "Embedding"; }

  int64_t num_embeddings() const { return num_embeddings_; }
  int64_t embedding_dim() const { return embedding_dim_; }
  const Tensor& weight() const { return weight_; }

 protected:
  // Integer indices of any shape -> indices.shape + [dim].
  Tensor forward_impl(const Tensor& indices) override;

 private:
  int64_t num_embeddings_, embedding_dim_;
  Tensor weight_;
};

}  // namespace accel::nn
