// f16/bf16 matmul grads for operands broadcast over the batch: the sum over the batch must be taken
// in f32 and rounded once, so every grad element is within half an ulp (of its dtype) of the f64
// grad of the same values. Rounding each batch entry's product to 16 bits first, then summing, is
// not. The floor on the ulp (1/64 of the largest grad) leaves room for the f32 accumulation.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "accel.h"
#include "tensor/nograd/copy.h"

using namespace accel;

namespace {

// Half an ulp of |r| in dtype (10 or 7 fraction bits), at least that of `floor`.
double half_ulp(double r, double floor, DType dtype) {
  const int fraction_bits = dtype == DType::f16 ? 10 : 7;
  int e;
  std::frexp(std::max(std::fabs(r), floor), &e);
  return std::ldexp(0.5, e - 1 - fraction_bits);
}

// The largest grad error of a and b in half ulps, for a @ b in dtype against f64 on the same values.
double worst_half_ulps(const Shape& sa, const Shape& sb, DType dtype) {
  Generator gen(5);
  const Tensor a = nograd::to_dtype(randn(sa, gen), dtype), b = nograd::to_dtype(randn(sb, gen), dtype);
  Tensor probe = matmul(nograd::to_dtype(a, DType::f64), nograd::to_dtype(b, DType::f64));
  const Tensor g = nograd::to_dtype(randn(probe.shape(), gen), dtype);
  auto grads = [&](DType d) {
    Tensor x = nograd::to_dtype(a, d).requires_grad_(), y = nograd::to_dtype(b, d).requires_grad_();
    backward(sum(matmul(x, y) * nograd::to_dtype(g, d)));
    return std::vector<Tensor>{x.grad(), y.grad()};
  };
  const auto got = grads(dtype), want = grads(DType::f64);
  double worst = 0;
  for (size_t k = 0; k < 2; ++k) {
    const auto gv = nograd::to_dtype(got[k], DType::f64).to_vector<double>(), wv = want[k].to_vector<double>();
    double largest = 0;
    for (double w : wv) largest = std::max(largest, std::fabs(w));
    for (size_t i = 0; i < gv.size(); ++i)
      worst = std::max(worst, std::fabs(gv[i] - wv[i]) / half_ulp(wv[i], largest / 64, dtype));
  }
  return worst;
}

}  // namespace

TEST_CASE("f16/bf16 matmul grads over a broadcast batch are summed in f32 and rounded once") {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{64, 8, 16}, {16, 8}},            // a weight shared by the batch
      {{64, 8, 16}, {1, 16, 8}},         // the same with a size-1 batch dim
      {{8, 16}, {64, 16, 8}},            // a matrix on the left shared by the batch
      {{4, 16, 8, 16}, {4, 1, 16, 8}},   // broadcast over the inner batch dim only
      {{16, 1, 8, 16}, {1, 4, 16, 8}},   // each operand broadcast over the other's dim
      {{16}, {64, 16, 8}},               // a vector on the left
      {{64, 8, 16}, {64, 16, 8}},        // no broadcast: nothing to sum
  };
  for (DType dtype : {DType::f16, DType::bf16}) {
    for (const auto& [sa, sb] : cases) {
      INFO(std::string(dtype_name(dtype)), " ", shape_str(sa), " x ", shape_str(sb));
      CHECK(worst_half_ulps(sa, sb, dtype) <= 1.02);
    }
  }
}
