// fp8 tensors: casts from and to every dtype round once (f64 included), and the ops that compute refuse
// f8 with a message naming the op and the dtype.
#include <doctest/doctest.h>

#include <cmath>

#include "accel.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/matmul.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"

using namespace accel;

TEST_CASE("f64 to f8 casts round once, not through f32") {
  // 1 + 2^-4 is the e4m3 tie between 1 and 1.125; 2^-40 above it is lost in f32 (which would then tie
  // and round down to 1), so a direct rounding must give 1.125.
  const double above_tie = 1.0 + std::ldexp(1.0, -4) + std::ldexp(1.0, -40);
  const Tensor t = from_vector<double>({above_tie, -above_tie, 1.0 + std::ldexp(1.0, -4)});
  const auto e4m3 = nograd::to_dtype(t, DType::f8_e4m3).to_vector<Float8E4M3>();
  CHECK(e4m3[0].bits == 0x39);
  CHECK(e4m3[1].bits == 0xb9);
  CHECK(e4m3[2].bits == 0x38);  // the tie itself: to even
  // e5m2: 1 + 2^-3 ties between 1 and 1.25.
  const double e5_above = 1.0 + std::ldexp(1.0, -3) + std::ldexp(1.0, -40);
  CHECK(nograd::to_dtype(from_vector<double>({e5_above}), DType::f8_e5m2).to_vector<Float8E5M2>()[0].bits == 0x3d);
}

TEST_CASE("casts into f8 from every dtype saturate and keep NaN; out of f8 they are exact") {
  for (DType to : {DType::f8_e4m3, DType::f8_e5m2}) {
    const double max = to == DType::f8_e4m3 ? 448.0 : 57344.0;
    for (DType from : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
      INFO(dtype_name(from), " -> ", dtype_name(to));
      const Tensor src = nograd::to_dtype(from_vector<double>({1e4 * max, -INFINITY, NAN, 0.5, -3.0}), from);
      const std::vector<double> back = nograd::to_dtype(nograd::to_dtype(src, to), DType::f64).to_vector<double>();
      CHECK(back[0] == max);  // f16 holds 1e4 * max as inf, which saturates too
      CHECK(back[1] == -max);
      CHECK(std::isnan(back[2]));
      CHECK(back[3] == 0.5);
      CHECK(back[4] == -3.0);
    }
    for (DType from : {DType::i64, DType::i32, DType::boolean}) {
      INFO(dtype_name(from), " -> ", dtype_name(to));
      const Tensor src = nograd::to_dtype(from_vector<double>({0, 1, 7}), from);
      const std::vector<double> back = nograd::to_dtype(nograd::to_dtype(src, to), DType::f64).to_vector<double>();
      CHECK(back[1] == 1.0);
      CHECK(back[2] == (from == DType::boolean ? 1.0 : 7.0));
    }
    // Every one of the 256 patterns widens exactly to f32 and back.
    Tensor all = empty({256}, to);
    for (int b = 0; b < 256; ++b) static_cast<uint8_t*>(all.data_ptr())[b] = static_cast<uint8_t>(b);
    const Tensor wide = nograd::to_dtype(all, DType::f32);
    const Tensor narrow = nograd::to_dtype(wide, to);
    for (int b = 0; b < 256; ++b) {
      const float v = wide.to_vector<float>()[static_cast<size_t>(b)];
      const uint8_t got = static_cast<const uint8_t*>(narrow.data_ptr())[b];
      if (std::isnan(v)) CHECK((got & 0x7f) == 0x7f);
      else if (!std::isinf(v)) CHECK(got == b);
    }
  }
}

TEST_CASE("f8 tensors take views, fill and comparisons; arithmetic and reductions name the op and refuse") {
  Tensor a = zeros({2, 3}, DType::f8_e4m3);
  nograd::fill_(a, 2.5);
  CHECK(nograd::transpose(a, 0, 1).shape() == Shape{3, 2});
  CHECK(a.to_vector<Float8E4M3>()[4].bits == Float8E4M3(2.5f).bits);
  CHECK(nograd::gt(a, 1.0).to_vector<bool>()[0]);
  CHECK_THROWS_WITH_AS(nograd::add(a, a),
                       "add: unsupported dtype f8_e4m3, expected a numeric dtype (not bool); f8 tensors take only "
                       "casts, copies and views (cast to f32 or bf16 first)",
                       Error);
  CHECK_THROWS_WITH_AS(nograd::sum(zeros({4}, DType::f8_e5m2)),
                       "sum: unsupported dtype f8_e5m2, expected a dtype that computes; f8 tensors take only casts, "
                       "copies and views (cast to f32 or bf16 first)",
                       Error);
  CHECK_THROWS_AS(nograd::matmul(a, nograd::transpose(a, 0, 1)), Error);
}
