// The replaced f32 formulas of bench/previous_ops.h, as tensor/cpu/vec_math.h, tensor/cpu/layer_norm.cpp
// and autograd/functions/elementwise.cpp had them.
#include "bench/previous_ops.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/cpu/loop.h"
#include "tensor/creation.h"
#include "tensor/nograd/elementwise.h"

namespace accel::bench::previous {

namespace {

using Vec = Eigen::Map<Eigen::Array<float, Eigen::Dynamic, 1>>;
using ConstVec = Eigen::Map<const Eigen::Array<float, Eigen::Dynamic, 1>>;
constexpr float kK = 0.7978845608028654f, kC = 0.044715f;

// out[i] = f over contiguous f32 runs split across the threads, as the old vector path ran.
template <class F>
Tensor map_runs(const Tensor& x, F&& f) {
  Tensor out = empty(x.shape(), DType::f32);
  const float* in = x.data<float>();
  float* o = out.data<float>();
  cpu::parallel_ranges(x.numel(), [&](int64_t b, int64_t e) { f(ConstVec(in + b, e - b), Vec(o + b, e - b), b); });
  return out;
}

}  // namespace

Tensor tanh(const Tensor& x) {
  return map_runs(x, [](const ConstVec& v, Vec y, int64_t) { y = v.tanh(); });
}

Tensor gelu(const Tensor& x) {
  return map_runs(x, [](const ConstVec& v, Vec y, int64_t) { y = 0.5f * v * (1.0f + (kK * (v + kC * v * v * v)).tanh()); });
}

Tensor gelu_backward(const Tensor& grad, const Tensor& x) {
  const float* g = grad.data<float>();
  return map_runs(x, [g](const ConstVec& v, Vec y, int64_t begin) {
    constexpr int64_t kBlock = 256;
    alignas(64) float tanh_buf[kBlock];
    for (int64_t b = 0; b < v.size(); b += kBlock) {
      const int64_t m = std::min<int64_t>(kBlock, v.size() - b);
      const ConstVec xb(v.data() + b, m), gb(g + begin + b, m);
      Vec t(tanh_buf, m);
      t = (kK * (xb + kC * xb * xb * xb)).tanh();
      Vec(y.data() + b, m) = gb * (0.5f * (1.0f + t) + 0.5f * xb * (1.0f - t * t) * kK * (1.0f + 3.0f * kC * xb * xb));
    }
  });
}

Tensor tanh_backward_from_output(const Tensor& grad, const Tensor& y) {
  return nograd::mul(grad, nograd::sub(ones_like(y), nograd::mul(y, y)));
}

nograd::LayerNormResult layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  const int64_t dim = x.size(-1), rows = x.numel() / dim;
  nograd::LayerNormResult r{empty(x.shape(), DType::f32), empty({rows}, DType::f32), empty({rows}, DType::f32)};
  const float *src = x.data<float>(), *w = weight.data<float>(), *b = bias.data<float>();
  float *dst = r.out.data<float>(), *mean = r.mean.data<float>(), *rstd = r.rstd.data<float>();
  const float inv_dim = 1.0f / static_cast<float>(dim);
#pragma omp parallel for if (x.numel() > cpu::kParallelGrain && rows > 1)
  for (int64_t i = 0; i < rows; ++i) {
    const float* in = src + i * dim;
    float sum = 0;
    for (int64_t j = 0; j < dim; ++j) sum += in[j];
    const float mu = sum * inv_dim;
    float sq = 0;
    for (int64_t j = 0; j < dim; ++j) {
      const float d = in[j] - mu;
      sq += d * d;
    }
    const float rs = 1.0f / std::sqrt(sq * inv_dim + static_cast<float>(eps));
    for (int64_t j = 0; j < dim; ++j) dst[i * dim + j] = (in[j] - mu) * rs * w[j] + b[j];
    mean[i] = mu;
    rstd[i] = rs;
  }
  return r;
}

namespace {

// The column sums of the weight and bias grads, from per-block partial sums in block order.
void finish_columns(const std::vector<float>& part, int64_t blocks, int64_t dim, float* out) {
#pragma omp parallel for if (blocks * dim > cpu::kParallelGrain)
  for (int64_t j = 0; j < dim; ++j) {
    float acc = 0;
    for (int64_t blk = 0; blk < blocks; ++blk) acc += part[blk * dim + j];
    out[j] = acc;
  }
}

}  // namespace

nograd::LayerNormGrads layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean,
                                           const Tensor& rstd, const Tensor& weight) {
  constexpr int64_t kRowsPerBlock = 64;
  const int64_t dim = x.size(-1), rows = x.numel() / dim, blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  nograd::LayerNormGrads grads{empty(x.shape(), DType::f32), empty({dim}, DType::f32), empty({dim}, DType::f32)};
  const float *dy = grad_out.data<float>(), *src = x.data<float>(), *w = weight.data<float>();
  const float *means = mean.data<float>(), *rstds = rstd.data<float>();
  float* dx = grads.grad_input.data<float>();
  std::vector<float> part_w(static_cast<size_t>(blocks * dim)), part_b(part_w.size());
  const float inv_dim = 1.0f / static_cast<float>(dim);
#pragma omp parallel for if (x.numel() > cpu::kParallelGrain && blocks > 1)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    float *pw = part_w.data() + blk * dim, *pb = part_b.data() + blk * dim;
    for (int64_t r = blk * kRowsPerBlock; r < std::min(rows, (blk + 1) * kRowsPerBlock); ++r) {
      const float *g = dy + r * dim, *in = src + r * dim;
      const float mu = means[r], rs = rstds[r];
      float sum_dxhat = 0, sum_dxhat_xhat = 0;
      for (int64_t j = 0; j < dim; ++j) {
        const float xhat = (in[j] - mu) * rs, dxhat = g[j] * w[j];
        sum_dxhat += dxhat;
        sum_dxhat_xhat += dxhat * xhat;
        pw[j] += g[j] * xhat;
        pb[j] += g[j];
      }
      const float mean_dxhat = sum_dxhat * inv_dim, mean_dxhat_xhat = sum_dxhat_xhat * inv_dim;
      for (int64_t j = 0; j < dim; ++j) {
        const float xhat = (in[j] - mu) * rs, dxhat = g[j] * w[j];
        dx[r * dim + j] = rs * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
      }
    }
  }
  finish_columns(part_w, blocks, dim, grads.grad_weight.data<float>());
  finish_columns(part_b, blocks, dim, grads.grad_bias.data<float>());
  return grads;
}

}  // namespace accel::bench::previous
