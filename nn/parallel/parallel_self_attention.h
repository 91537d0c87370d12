// nn::parallel::ParallelSelfAttention: causal self-attention with its heads split across the
// tensor-parallel group: q, k and v of a rank's heads from a column-parallel projection, the output
// projection row-parallel (Megatron-LM's attention: one all-reduce forward, one backward).
#pragma once

#include <memory>

#include "collective/communicator.h"
#include "nn/attention.h"
#include "nn/dropout.h"
#include "nn/module.h"
#include "nn/parallel/column_parallel_linear.h"
#include "nn/parallel/row_parallel_linear.h"

namespace accel::nn::parallel {

class ParallelSelfAttention : public Module {
 public:
  // This rank's heads of a full layer, copied: n_head must be a multiple of tp.size(). Rank r holds
  // heads [r h, (r + 1) h), h = n_head / tp.size(): the q, k and v rows of those heads in qkv (three
  // blocks of the fused projection, not one range of it) and the same columns of proj.
  //
  // resid_drop acts on the replicated output and starts from the full layer's stream, so every rank
  // drops the same elements as the full layer. attn_drop acts on this rank's heads only and draws from
  // a stream of the rank's own: with attention dropout on, the ranks' masks differ from the full
  // layer's (Megatron keeps a per-rank stream there too).
  //
  // FromFull::in_place takes the full layer's parameters and dropouts instead of copying them.
  static std::shared_ptr<ParallelSelfAttention> from_full(const CausalSelfAttention& full, Communicator& tp,
                                                          FromFull how = FromFull::copy);

  std::string type_name() const override { return "ParallelSelfAttention"; }

  int64_t n_embd() const { return n_embd_; }
  int64_t local_heads() const { return local_heads_; }
  const std::shared_ptr<ColumnParallelLinear>& qkv() const { return qkv_; }
  const std::shared_ptr<RowParallelLinear>& proj() const { return proj_; }

 protected:
  Tensor forward_impl(const Tensor& x) override;  // [B, T, n_embd] replicated -> [B, T, n_embd] replicated

 private:
  ParallelSelfAttention(const CausalSelfAttention& full, Communicator& tp, FromFull how);

  int64_t n_embd_, local_heads_, head_dim_;
  std::shared_ptr<ColumnParallelLinear> qkv_;
  std::shared_ptr<RowParallelLinear> proj_;
  std::shared_ptr<Dropout> attn_drop_, resid_drop_;
};

}  // namespace accel::nn::parallel
