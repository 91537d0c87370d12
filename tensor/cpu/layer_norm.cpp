// CPU layer norm: one row per iteration, its statistics in two passes of pairwise sums
// (kernels/nn_math.h says why), in f32 for f32/f16/bf16 and f64 for f64.
#include "tensor/cpu/layer_norm.h"

#include <algorithm>
#include <array>
#include <vector>

#include "kernels/nn_math.h"
#include "tensor/cpu/loop.h"
#include "tensor/cpu/map.h"
#include "tensor/cpu/row_sum.h"
#include "tensor/op_time.h"

namespace accel::cpu {

namespace {

// Rows per block of the weight/bias grad partial sums; fixed so the sums are reproducible.
constexpr int64_t kRowsPerBlock = 64;

}  // namespace

void layer_norm(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                const Tensor& bias, double eps) {
  const op_time::Scope timed(op_time::Kind::layer_norm);
  const int64_t dim = x.shape().back(), rows = x.numel() / dim;
  dispatch_floating(x.dtype(), "layer_norm", [&]<class T>() {
    using C = compute_t<T>;  // float or double: also the stats dtype
    const T* src = static_cast<const T*>(x.data_ptr());
    const T* w = weight.defined() ? static_cast<const T*>(weight.data_ptr()) : nullptr;
    const T* b = bias.defined() ? static_cast<const T*>(bias.data_ptr()) : nullptr;
    T* dst = static_cast<T*>(out.data_ptr());
    C* mean_out = static_cast<C*>(mean.data_ptr());
    C* rstd_out = static_cast<C*>(rstd.data_ptr());
    const C inv_dim = C(1) / static_cast<C>(dim);
#pragma omp parallel for if (x.numel() > kParallelGrain && rows > 1)
    for (int64_t r = 0; r < rows; ++r) {
      const T* in = src + r * dim;
      const C shift = load(in[0]);
      const C mu = layer_norm_mean(
          shift, row_sums<1, C>(0, dim, [&](int64_t j) { return std::array<C, 1>{load(in[j]) - shift}; })[0], inv_dim);
      const std::array<C, 2> dev = row_sums<2, C>(0, dim, [&](int64_t j) {
        const C d = load(in[j]) - mu;
        return std::array<C, 2>{d, d * d};
      });
      const LayerNormRow<C> row = layer_norm_row(mu, dev[0], dev[1], inv_dim, static_cast<C>(eps));
      T* o = dst + r * dim;
      for (int64_t j = 0; j < dim; ++j)
        o[j] = store<T>(layer_norm_elem(load(in[j]), row, w ? load(w[j]) : C(1), b ? load(b[j]) : C(0)));
      mean_out[r] = layer_norm_row_mean(row);
      rstd_out[r] = row.rstd;
    }
  });
}

void layer_norm_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                         const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight) {
  const op_time::Scope timed(op_time::Kind::layer_norm);
  const int64_t dim = x.shape().back(), rows = x.numel() / dim;
  dispatch_floating(x.dtype(), "layer_norm_backward", [&]<class T>() {
    using C = compute_t<T>;
    const T* dy = static_cast<const T*>(grad_out.data_ptr());
    const T* src = static_cast<const T*>(x.data_ptr());
    const T* w = weight.defined() ? static_cast<const T*>(weight.data_ptr()) : nullptr;
    const C* means = static_cast<const C*>(mean.data_ptr());
    const C* rstds = static_cast<const C*>(rstd.data_ptr());
    T* dx = static_cast<T*>(grad_input.data_ptr());
    const bool want_w = grad_weight.defined(), want_b = grad_bias.defined();
    const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    // Per block of rows: sum(dy * xhat) and sum(dy) for each column.
    std::vector<C> part_w(want_w ? blocks * dim : 0), part_b(want_b ? blocks * dim : 0);
    const C inv_dim = C(1) / static_cast<C>(dim);
#pragma omp parallel for if (x.numel() > kParallelGrain && blocks > 1)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      C* pw = want_w ? part_w.data() + blk * dim : nullptr;
      C* pb = want_b ? part_b.data() + blk * dim : nullptr;
      for (int64_t r = blk * kRowsPerBlock; r < std::min(rows, (blk + 1) * kRowsPerBlock); ++r) {
        const T* g = dy + r * dim;
        const T* in = src + r * dim;
        const C mu = means[r], rs = rstds[r];
        const std::array<C, 2> sums = row_sums<2, C>(0, dim, [&](int64_t j) {
          const C gj = load(g[j]), xhat = (load(in[j]) - mu) * rs;
          const C dxhat = w ? gj * load(w[j]) : gj;
          return std::array<C, 2>{dxhat, dxhat * xhat};
        });
        for (int64_t j = 0; j < dim; ++j) {
          const C gj = load(g[j]);
          if (pw) pw[j] += gj * ((load(in[j]) - mu) * rs);
          if (pb) pb[j] += gj;
        }
        const C mean_dxhat = sums[0] * inv_dim, mean_dxhat_xhat = sums[1] * inv_dim;
        T* o = dx + r * dim;
        for (int64_t j = 0; j < dim; ++j) {
          const C gj = load(g[j]), xhat = (load(in[j]) - mu) * rs;
          const C dxhat = w ? gj * load(w[j]) : gj;
          o[j] = store<T>(layer_norm_backward_elem(dxhat, xhat, rs, mean_dxhat, mean_dxhat_xhat));
        }
      }
    }
    auto finish = [&](const std::vector<C>& part, const Tensor& grad) {
      T* out = static_cast<T*>(grad.data_ptr());
#pragma omp parallel for if (blocks * dim > kParallelGrain)
      for (int64_t j = 0; j < dim; ++j) {
        C acc = 0;
        for (int64_t blk = 0; blk < blocks; ++blk) acc += part[blk * dim + j];
        out[j] = store<T>(acc);
      }
    };
    if (want_w) finish(part_w, grad_weight);
    if (want_b) finish(part_b, grad_bias);
  });
}

}  // namespace accel::cpu
