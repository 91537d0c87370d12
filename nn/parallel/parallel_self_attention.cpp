// ParallelSelfAttention: the full layer's heads dealt out to the ranks, attention over the local heads,
// and the row-parallel projection that sums the heads' contributions.
#include "nn/parallel/parallel_self_attention.h"

#include <fmt/format.h>

#include <cmath>

#include "autograd/functions.h"
#include "nn/parallel/partition.h"
#include "nn/parallel/replica.h"

namespace accel::nn::parallel {

ParallelSelfAttention::ParallelSelfAttention(const CausalSelfAttention& full, Communicator& tp, FromFull how)
    : n_embd_(full.n_embd()),
      local_heads_(divide_by_tp("ParallelSelfAttention", "n_head", full.n_head(), tp.size())),
      head_dim_(full.n_embd() / full.n_head()) {
  qkv_ = register_module("qkv", ColumnParallelLinear::from_full(*full.qkv(), tp,
                                                                {.gather_output = false, .fused_blocks = 3}, how));
  proj_ = register_module("proj", RowParallelLinear::from_full(*full.proj(), tp, {.input_is_parallel = true}, how));
  attn_drop_ = register_module("attn_drop", replica_of(full.attn_drop(), how));
  // The rank's own stream for its heads' masks: the full layer's seed moved by the rank.
  const GeneratorState shared = full.attn_drop()->generator().state();
  attn_drop_->generator().set_state({shared.seed + 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(tp.rank()),
                                     shared.offset});
  resid_drop_ = register_module("resid_drop", replica_of(full.resid_drop(), how));
  if (!full.is_training()) eval();
}

std::shared_ptr<ParallelSelfAttention> ParallelSelfAttention::from_full(const CausalSelfAttention& full,
                                                                        Communicator& tp, FromFull how) {
  return std::shared_ptr<ParallelSelfAttention>(new ParallelSelfAttention(full, tp, how));
}

Tensor ParallelSelfAttention::forward_impl(const Tensor& x) {
  if (x.dim() != 3 || x.size(2) != n_embd_)
    throw Error(fmt::format("ParallelSelfAttention: input must be [B, T, {}], got {}", n_embd_, shape_str(x.shape())));
  const int64_t B = x.size(0), T = x.size(1), H = local_heads_, D = head_dim_, C = H * D;
  // [B, T, 3 C / tp]: this rank's q, k and v blocks -> three [B, T, H / tp, D] views.
  std::vector<Tensor> qkv = split((*qkv_)(x), C, 2);
  auto heads = [&](const Tensor& t) { return reshape(t, {B, T, H, D}); };
  // this rank's heads side by side
  const Tensor y = causal_attention_heads(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), *attn_drop_);
  return (*resid_drop_)((*proj_)(y));
}

}  // namespace accel::nn::parallel
