// f32 tanh and gelu through the op entry points (the CPU's vector path on contiguous runs, its
// strided loop otherwise) against f64 references computed here, over inputs dense near 0 and out to
// |x| = 20: forward within about an ulp, gelu_backward within 1e-5 relative (floored at 1e-3 of the
// largest); f16/bf16 compute the same f32 math and round once.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "accel.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"
#include "bench/activation_reference.h"

using namespace accel;
using namespace accel::test;

namespace {

// The sweep as a contiguous tensor and as a stride-2 view of a twice-longer one.
struct Layouts {
  Tensor contiguous, strided;
};

Layouts layouts(const std::vector<float>& xs) {
  std::vector<float> spread(2 * xs.size(), 0.0f);
  for (size_t i = 0; i < xs.size(); ++i) spread[2 * i] = xs[i];
  const Tensor twice = from_vector<float>(spread);
  return {from_vector<float>(xs), nograd::slice(twice, 0, 0, twice.size(0), 2)};
}

std::vector<float> values(const Tensor& t) { return nograd::contiguous(t).to_vector<float>(); }

}  // namespace

TEST_CASE("f32 tanh is within an ulp of f64 tanh, contiguous and strided") {
  const std::vector<float> xs = activation_sweep();
  const Layouts in = layouts(xs);
  for (const Tensor& x : {in.contiguous, in.strided}) {
    const WorstError w = max_ulp_error(xs, values(nograd::tanh(x)), ref_tanh);
    INFO("contiguous ", x.is_contiguous(), ": worst at x = ", w.x, ", ", w.error, " ulp");
    CHECK(w.error <= 1.0);
  }
}

TEST_CASE("f32 gelu is within about an ulp of f64 gelu, contiguous and strided") {
  const std::vector<float> xs = activation_sweep();
  const Layouts in = layouts(xs);
  for (const Tensor& x : {in.contiguous, in.strided}) {
    const std::vector<float> got = values(nograd::gelu(x));
    // Below 1e-36 in magnitude (x < -10) the result may flush to zero.
    const WorstError w = max_ulp_error(xs, got, ref_gelu, 1e-36);
    INFO("contiguous ", x.is_contiguous(), ": worst at x = ", w.x, ", ", w.error, " ulp");
    CHECK(w.error <= 1.15);
    double worst_tiny = 0;
    for (size_t i = 0; i < xs.size(); ++i)
      if (std::fabs(ref_gelu(xs[i])) < 1e-36) worst_tiny = std::max(worst_tiny, std::fabs(got[i] - ref_gelu(xs[i])));
    CHECK(worst_tiny <= 1e-36);
  }
}

TEST_CASE("f32 gelu_backward is within 1e-5 of the f64 derivative, near saturation and its zero too") {
  const std::vector<float> xs = activation_sweep();
  const Layouts in = layouts(xs);
  const Tensor ones = from_vector<float>(std::vector<float>(xs.size(), 1.0f));
  for (const Tensor& x : {in.contiguous, in.strided}) {
    const WorstError w = max_floored_relative_error(xs, values(nograd::gelu_backward(ones, x)), ref_gelu_grad);
    INFO("contiguous ", x.is_contiguous(), ": worst at x = ", w.x, ", ", w.error);
    CHECK(w.error <= 1e-5);
  }
}

TEST_CASE("f32 tanh_backward is within 1e-5 of sech^2, from the input") {
  const std::vector<float> xs = activation_sweep();
  const Layouts in = layouts(xs);
  const Tensor ones = from_vector<float>(std::vector<float>(xs.size(), 1.0f));
  for (const Tensor& x : {in.contiguous, in.strided}) {
    const WorstError w = max_floored_relative_error(xs, values(nograd::tanh_backward(ones, x)), ref_tanh_grad);
    INFO("contiguous ", x.is_contiguous(), ": worst at x = ", w.x, ", ", w.error);
    CHECK(w.error <= 1e-5);
  }
  CHECK_THROWS_WITH_AS(nograd::tanh_backward(ones, from_vector<float>({1.0f, 2.0f})),
                       doctest::Contains("tanh_backward:"), Error);
}

TEST_CASE("f16 and bf16 tanh and gelu compute the f32 math and round once") {
  std::vector<float> xs;
  for (int i = -1200; i <= 1200; ++i) xs.push_back(static_cast<float>(i) * 0.01f);
  for (DType dtype : {DType::f16, DType::bf16}) {
    const Tensor x = nograd::to_dtype(from_vector<float>(xs), dtype);
    const std::vector<float> widened = values(nograd::to_dtype(x, DType::f32));
    const std::vector<float> got_tanh = values(nograd::to_dtype(nograd::tanh(x), DType::f32));
    const std::vector<float> got_gelu = values(nograd::to_dtype(nograd::gelu(x), DType::f32));
    const std::vector<float> want_tanh =
        values(nograd::to_dtype(nograd::to_dtype(nograd::tanh(from_vector<float>(widened)), dtype), DType::f32));
    const std::vector<float> want_gelu =
        values(nograd::to_dtype(nograd::to_dtype(nograd::gelu(from_vector<float>(widened)), dtype), DType::f32));
    INFO(std::string(dtype_name(dtype)));
    CHECK(got_tanh == want_tanh);
    CHECK(got_gelu == want_gelu);
  }
}
