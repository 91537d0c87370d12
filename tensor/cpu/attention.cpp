// CPU causal attention, flash-attention style: each thread takes whole (batch, head) pairs and walks
// their queries in blocks, so the weights of a block ([rows, keys it sees]) are the only score
// matrix ever held, and none outlives its block. Backward recomputes them from the saved
// log-sum-exp. One thread computes each head the same way whatever the thread count, so the results
// do not depend on it.
#include "tensor/cpu/attention.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "tensor/cpu/loop.h"
#include "tensor/op_time.h"

namespace accel::cpu {

namespace {

// Queries per block: a [64, T] block of weights stays in L2 for T up to a few thousand.
constexpr int64_t kQueryBlock = 64;

template <class C>
using RowMatrix = Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class C>
using ConstHead = Eigen::Map<const RowMatrix<C>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class C>
using Head = Eigen::Map<RowMatrix<C>, Eigen::Unaligned, Eigen::OuterStride<>>;

// Head h of batch entry b of a [B, T, H, D] tensor, as a [T, D] matrix.
template <class C>
ConstHead<C> const_head(const Tensor& t, int64_t b, int64_t h) {
  const C* p = static_cast<const C*>(t.data_ptr()) + b * t.stride(0) + h * t.stride(2);
  return ConstHead<C>(p, t.size(1), t.size(3), Eigen::OuterStride<>(t.stride(1)));
}
template <class C>
Head<C> head(const Tensor& t, int64_t b, int64_t h) {
  C* p = static_cast<C*>(t.data_ptr()) + b * t.stride(0) + h * t.stride(2);
  return Head<C>(p, t.size(1), t.size(3), Eigen::OuterStride<>(t.stride(1)));
}

// Calls task(b, h) for every head, over threads when the work pays for them.
template <class Task>
void for_each_head(const Tensor& q, Task&& task) {
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), D = q.size(3);
  const int64_t heads = B * H;
#pragma omp parallel for schedule(static) if (heads > 1 && heads * T * T * D > kParallelGrain)
  for (int64_t i = 0; i < heads; ++i) task(i / H, i % H);
}

// The weights of queries [i0, i0 + rows) over keys [0, i0 + rows), in s: query i sees keys <= i.
// With lse undefined (forward) each row's softmax is taken and its log-sum-exp written to row_lse;
// else (backward) the weights are exp(score - lse) from the forward's lse.
template <class C>
void block_weights(RowMatrix<C>& s, const ConstHead<C>& q, const ConstHead<C>& k, int64_t i0, int64_t rows, C scale,
                   C* row_lse, const C* saved_lse) {
  const int64_t keys = i0 + rows;
  s.resize(rows, keys);
  s.noalias() = scale * (q.middleRows(i0, rows) * k.topRows(keys).transpose());
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t seen = i0 + r + 1;
    auto row = s.row(r).head(seen).array();
    if (saved_lse) {
      row = (row - saved_lse[i0 + r]).exp();
    } else {
      const C max = row.maxCoeff();
      row = (row - max).exp();
      const C sum = row.sum();
      row *= C(1) / sum;
      row_lse[i0 + r] = max + std::log(sum);
    }
    s.row(r).tail(keys - seen).setZero();
  }
}

template <class C>
void forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v, C scale) {
  const int64_t T = q.size(1), H = q.size(2);
  for_each_head(q, [&](int64_t b, int64_t h) {
    const ConstHead<C> Q = const_head<C>(q, b, h), K = const_head<C>(k, b, h), V = const_head<C>(v, b, h);
    Head<C> O = head<C>(out, b, h);
    C* L = static_cast<C*>(lse.data_ptr()) + (b * H + h) * T;
    RowMatrix<C> p;
    for (int64_t i0 = 0; i0 < T; i0 += kQueryBlock) {
      const int64_t rows = std::min(kQueryBlock, T - i0);
      block_weights<C>(p, Q, K, i0, rows, scale, L, nullptr);
      O.middleRows(i0, rows).noalias() = p * V.topRows(i0 + rows);
    }
  });
}

template <class C>
void backward(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_out,
              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, C scale) {
  const int64_t T = q.size(1), H = q.size(2);
  for_each_head(q, [&](int64_t b, int64_t h) {
    const ConstHead<C> Q = const_head<C>(q, b, h), K = const_head<C>(k, b, h), V = const_head<C>(v, b, h);
    const ConstHead<C> O = const_head<C>(out, b, h), dO = const_head<C>(grad_out, b, h);
    Head<C> dQ = head<C>(grad_q, b, h), dK = head<C>(grad_k, b, h), dV = head<C>(grad_v, b, h);
    const C* L = static_cast<const C*>(lse.data_ptr()) + (b * H + h) * T;
    dK.setZero();
    dV.setZero();
    RowMatrix<C> p, dp;
    for (int64_t i0 = 0; i0 < T; i0 += kQueryBlock) {
      const int64_t rows = std::min(kQueryBlock, T - i0), keys = i0 + rows;
      block_weights<C>(p, Q, K, i0, rows, scale, nullptr, L);
      const auto dO_block = dO.middleRows(i0, rows);
      dV.topRows(keys).noalias() += p.transpose() * dO_block;
      dp.noalias() = dO_block * V.topRows(keys).transpose();
      // d score = p * (dp - sum_j p_j dp_j), and sum_j p_j dp_j = dO . O for each query row.
      const Eigen::Array<C, Eigen::Dynamic, 1> row_dot = (dO_block.array() * O.middleRows(i0, rows).array()).rowwise().sum();
      dp.array() = p.array() * (dp.array().colwise() - row_dot);
      dQ.middleRows(i0, rows).noalias() = scale * (dp * K.topRows(keys));
      dK.topRows(keys).noalias() += scale * (dp.transpose() * Q.middleRows(i0, rows));
    }
  });
}

}  // namespace

void causal_attention(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                      double scale) {
  const op_time::Scope timed(op_time::Kind::attention);
  if (q.dtype() == DType::f64) return forward<double>(out, lse, q, k, v, scale);
  forward<float>(out, lse, q, k, v, static_cast<float>(scale));
}

void causal_attention_backward(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v,
                               const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& out, const Tensor& lse, double scale) {
  const op_time::Scope timed(op_time::Kind::attention);
  if (q.dtype() == DType::f64) return backward<double>(grad_q, grad_k, grad_v, grad_out, q, k, v, out, lse, scale);
  backward<float>(grad_q, grad_k, grad_v, grad_out, q, k, v, out, lse, static_cast<float>(scale));
}

}  // namespace accel::cpu
