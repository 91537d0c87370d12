// FP8 Linear against f32 on random normal data: the quality floors (cast SQNR >= 25 dB, output
// >= 18 dB, weight grad >= 17 dB), the amaxes each pass records, and the dequantised GEMM equal to a
// GEMM of the fp8 values themselves.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <string>

#include "accel.h"
#include "autograd/fp8/fp8_linear.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/matmul.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"

using namespace accel;

namespace {

// 10 log10(sum ref^2 / sum (ref - got)^2), in f64.
double sqnr_db(const Tensor& ref, const Tensor& got) {
  const std::vector<double> r = nograd::to_dtype(ref, DType::f64).to_vector<double>();
  const std::vector<double> g = nograd::to_dtype(got, DType::f64).to_vector<double>();
  REQUIRE(r.size() == g.size());
  double signal = 0, noise = 0;
  for (size_t i = 0; i < r.size(); ++i) signal += r[i] * r[i], noise += (r[i] - g[i]) * (r[i] - g[i]);
  return 10.0 * std::log10(signal / noise);
}

struct Run {
  Tensor out, gx, gw, gb;
};

Run run_linear(bool fp8, const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& g,
               const std::shared_ptr<fp8::LinearScaling>& scaling, const fp8::RecipeOptions& options) {
  Tensor x = nograd::clone(x0), w = nograd::clone(w0), b = nograd::clone(b0);  // fresh leaves per run
  x.requires_grad_(true);
  w.requires_grad_(true);
  b.requires_grad_(true);
  const Tensor out = fp8 ? fp8::linear(x, w, b, scaling, options) : linear(x, w, b);
  backward(out, g);
  return {detach(out), x.grad(), w.grad(), b.grad()};
}

}  // namespace

TEST_CASE("fp8 casts of random normal data with a delayed scale keep SQNR >= 25 dB") {
  Generator gen(11);
  const Tensor t = randn({64, 256}, gen);
  for (const DType dtype : {DType::f8_e4m3, DType::f8_e5m2}) {
    fp8::ScalingState state(4);
    fp8::quantize_dequantize(t, state, dtype);  // records the amax
    state.update(fp8::RecipeOptions{.amax_history_len = 4}, fp8::fp8_max(dtype));
    const double db = sqnr_db(t, fp8::quantize_dequantize(t, state, dtype));
    INFO(std::string(dtype_name(dtype)), " SQNR ", db, " dB");  // measured: e4m3 31.4 dB, e5m2 25.7 dB
    CHECK(db >= 25.0);
  }
}

TEST_CASE("fp8 Linear: output >= 18 dB and weight grad >= 17 dB against f32, after one scale update") {
  Generator gen(12);
  const Tensor x = randn({128, 192}, gen), w = nograd::mul(randn({96, 192}, gen), 0.05),
               b = randn({96}, gen), g = randn({128, 96}, gen);
  const fp8::RecipeOptions options{.amax_history_len = 8};
  // Step 1 records the amaxes at scale 1; the update sets the recipe's scales: e4m3 for input and
  // weight, e5m2 for the grad (HYBRID).
  auto scaling = std::make_shared<fp8::LinearScaling>(8);
  run_linear(true, x, w, b, g, scaling, options);
  for (const fp8::ScalingState& s : scaling->roles) CHECK(s.history[0] > 0.0f);
  (*scaling)[fp8::Role::input].update(options, kFloat8E4M3Max);
  (*scaling)[fp8::Role::weight].update(options, kFloat8E4M3Max);
  (*scaling)[fp8::Role::grad_output].update(options, kFloat8E5M2Max);
  CHECK((*scaling)[fp8::Role::weight].scale > 100.0f);  // small weights get a large scale

  const Run ref = run_linear(false, x, w, b, g, nullptr, options);
  const Run got = run_linear(true, x, w, b, g, scaling, options);
  const double out_db = sqnr_db(ref.out, got.out), gw_db = sqnr_db(ref.gw, got.gw), gx_db = sqnr_db(ref.gx, got.gx);
  INFO("output ", out_db, " dB, weight grad ", gw_db, " dB, input grad ", gx_db, " dB");
  CHECK(out_db >= 18.0);  // measured: output 33.1 dB, weight grad 24.7 dB, input grad 24.6 dB
  CHECK(gw_db >= 17.0);
  CHECK(gx_db >= 17.0);
  CHECK(sqnr_db(ref.gb, got.gb) > 100.0);  // the bias grad reads the unquantised output grad
}

TEST_CASE("fp8 Linear's dequantised GEMM equals the GEMM of the fp8 values, scaled back") {
  Generator gen(13);
  const Tensor x = randn({8, 16}, gen), w = randn({4, 16}, gen);
  auto scaling = std::make_shared<fp8::LinearScaling>(1);
  (*scaling)[fp8::Role::input].scale = 64.0f;
  (*scaling)[fp8::Role::weight].scale = 32.0f;
  const Tensor out = fp8::linear(x, w, Tensor(), scaling, fp8::RecipeOptions{.amax_history_len = 1});
  // By hand: the fp8 codes as values, a plain f32 GEMM, then one multiply by 1 / (64 * 32).
  const Tensor xq = nograd::to_dtype(nograd::to_dtype(nograd::mul(x, 64.0), DType::f8_e4m3), DType::f32);
  const Tensor wq = nograd::to_dtype(nograd::to_dtype(nograd::mul(w, 32.0), DType::f8_e4m3), DType::f32);
  const Tensor want = nograd::mul(nograd::matmul(xq, nograd::transpose(wq, 0, 1)), 1.0 / 2048.0);
  CHECK(sqnr_db(want, out) > 120.0);  // equal up to the order of the f32 sum
  // The amaxes went into history[0]: max |x| and max |w|.
  CHECK((*scaling)[fp8::Role::input].history[0] == static_cast<float>(nograd::max(nograd::abs(x)).item()));
  CHECK((*scaling)[fp8::Role::weight].history[0] == static_cast<float>(nograd::max(nograd::abs(w)).item()));
  CHECK_THROWS_WITH_AS(fp8::linear(x, w, Tensor(), scaling, {}, DType::f16),
                       "fp8::linear: output dtype f16, expected f32 or bf16", Error);
}
