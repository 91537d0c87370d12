// The fused CPU ops that replace chains of simpler ones in training: linear (GEMM with the bias folded
// in), relu_backward, causal_softmax and its backward, and sums over leading dims. Each is checked
// against the chain it replaces or an f64 loop, for odd, strided and half inputs, and for its errors.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <limits>

#include "accel.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/linear.h"
#include "tensor/nograd/matmul.h"
#include "tensor/nograd/nn_ops.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"

using namespace accel;

namespace {

Tensor random(const Shape& shape, uint64_t seed, DType dtype = DType::f64) {
  Generator gen(seed);
  return nograd::to_dtype(randn(shape, gen, DType::f64), dtype);
}

// |got - want| <= atol + rtol * |want| everywhere, both read as f64.
void check_close(const Tensor& got, const Tensor& want, double rtol, double atol) {
  REQUIRE(got.shape() == want.shape());
  const auto g = nograd::to_dtype(nograd::contiguous(got), DType::f64).to_vector<double>();
  const auto w = nograd::to_dtype(nograd::contiguous(want), DType::f64).to_vector<double>();
  int bad = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(g[i] - w[i]) <= atol + rtol * std::abs(w[i])) && bad++ < 5)
      FAIL_CHECK("element " << i << " of " << shape_str(got.shape()) << ": got " << g[i] << ", want " << w[i]);
  CHECK(bad == 0);
}

// x @ w^T + b by its definition, in f64.
Tensor linear_reference(const Tensor& x, const Tensor& w, const Tensor& b) {
  const int64_t in = w.size(1), out = w.size(0);
  const auto xv = nograd::to_dtype(nograd::contiguous(x), DType::f64).to_vector<double>();
  const auto wv = nograd::to_dtype(nograd::contiguous(w), DType::f64).to_vector<double>();
  const std::vector<double> bv =
      b.defined() ? nograd::to_dtype(nograd::contiguous(b), DType::f64).to_vector<double>() : std::vector<double>(out, 0.0);
  const int64_t rows = x.numel() / std::max<int64_t>(in, 1);
  std::vector<double> y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = bv[o];
      for (int64_t k = 0; k < in; ++k) acc += xv[r * in + k] * wv[o * in + k];
      y[r * out + o] = acc;
    }
  Shape shape = x.shape();
  shape.back() = out;
  return from_vector<double>(y, shape);
}

// A tensor adopting host memory but labelled as a CUDA tensor, so device checks can be tested
// without a GPU. Nothing may read through it.
Tensor fake_cuda(const Shape& shape) {
  static float dummy[64];
  auto storage = std::make_shared<Storage>(dummy, sizeof dummy, Device::cuda(0), [](void*) {});
  return Tensor::make_view(storage, shape, contiguous_strides(shape), 0, DType::f32);
}

// The chain causal_softmax replaces: softmax(masked_fill(x * scale, j > i + Tk - Tq, -inf), -1).
Tensor causal_reference(const Tensor& x, double scale) {
  const int64_t tq = x.size(-2), tk = x.size(-1);
  const Tensor keys = nograd::view(arange(tk), {1, tk});
  const Tensor last_seen = nograd::view(arange(static_cast<double>(tk - tq), static_cast<double>(tk)), {tq, 1});
  const Tensor masked =
      nograd::masked_fill(nograd::mul(x, scale), nograd::gt(keys, last_seen), -std::numeric_limits<double>::infinity());
  return nograd::softmax(masked, -1);
}

}  // namespace

TEST_CASE("linear equals x @ w^T + b for odd sizes, batched and strided inputs, with and without bias") {
  const std::vector<std::array<int64_t, 3>> sizes = {{1, 1, 1}, {7, 13, 5}, {3, 1, 4}, {64, 65, 66}, {97, 31, 89}};
  uint64_t seed = 1;
  for (const auto& [rows, in, out] : sizes) {
    INFO(rows << " x " << in << " -> " << out);
    const Tensor x = random({rows, in}, seed++), w = random({out, in}, seed++), b = random({out}, seed++);
    check_close(nograd::linear(x, w, b), linear_reference(x, w, b), 1e-12, 1e-12);
    check_close(nograd::linear(x, w, Tensor()), linear_reference(x, w, Tensor()), 1e-12, 1e-12);
  }
  // Leading dims fold into rows; a 1-d x is one row.
  const Tensor w = random({6, 4}, 20), b = random({6}, 21);
  const Tensor x3 = random({2, 3, 4}, 22);
  const Tensor y3 = nograd::linear(x3, w, b);
  CHECK(y3.shape() == Shape{2, 3, 6});
  check_close(y3, linear_reference(x3, w, b), 1e-12, 1e-12);
  const Tensor x1 = random({4}, 23);
  CHECK(nograd::linear(x1, w, b).shape() == Shape{6});
  check_close(nograd::linear(x1, w, b), linear_reference(x1, w, b), 1e-12, 1e-12);
  // Strided operands are read as they are: a transposed x, a transposed weight, a strided bias.
  const Tensor xt = nograd::transpose(random({4, 5}, 24), 0, 1);               // [5, 4], column-major
  const Tensor wt = nograd::transpose(random({4, 6}, 25), 0, 1);               // [6, 4], column-major
  const Tensor bs = nograd::slice(random({12}, 26), 0, 0, 12, 2);              // [6], stride 2
  const Tensor xp = nograd::permute(random({3, 4, 2}, 27), {0, 2, 1});         // [3, 2, 4], must be copied to fold
  check_close(nograd::linear(xt, wt, bs), linear_reference(xt, wt, bs), 1e-12, 1e-12);
  check_close(nograd::linear(xp, w, b), linear_reference(xp, w, b), 1e-12, 1e-12);
  // Empty dims: no rows, or no inputs (the output is the bias).
  CHECK(nograd::linear(random({0, 4}, 28), w, b).shape() == Shape{0, 6});
  const Tensor no_in = nograd::linear(random({3, 0}, 29), random({6, 0}, 30), b);
  check_close(no_in, nograd::expand(b, {3, 6}), 0, 0);
}

TEST_CASE("linear in f32 is threaded and agrees with f64; f16/bf16 compute in f32 and round once") {
  // Large enough that Eigen splits the GEMM and the bias fill runs on every thread.
  const Tensor x = random({300, 130}, 31, DType::f32), w = random({150, 130}, 32, DType::f32),
               b = random({150}, 33, DType::f32);
  const Tensor y = nograd::linear(x, w, b);
  CHECK(y.dtype() == DType::f32);
  check_close(y, linear_reference(x, w, b), 1e-5, 1e-4);
  for (DType half : {DType::f16, DType::bf16}) {
    INFO(dtype_name(half));
    const Tensor xh = nograd::to_dtype(nograd::narrow(x, 0, 0, 9), half), wh = nograd::to_dtype(w, half),
                 bh = nograd::to_dtype(b, half);
    const Tensor yh = nograd::linear(xh, wh, bh);
    CHECK(yh.dtype() == half);
    // The f32 result of the same (rounded) inputs, rounded once to the half type.
    const Tensor want = nograd::to_dtype(
        nograd::linear(nograd::to_dtype(xh, DType::f32), nograd::to_dtype(wh, DType::f32), nograd::to_dtype(bh, DType::f32)), half);
    check_close(yh, want, half == DType::f16 ? 1e-3 : 1e-2, 1e-3);
  }
}

TEST_CASE("linear errors name the op and the shapes, dtypes or devices") {
  const Tensor x = zeros({2, 4}), w = zeros({3, 4}), b = zeros({3});
  CHECK_THROWS_WITH_AS(nograd::linear(Tensor(), w, b), "linear: got an undefined x or weight", Error);
  CHECK_THROWS_WITH_AS(nograd::linear(x, Tensor(), b), "linear: got an undefined x or weight", Error);
  CHECK_THROWS_WITH_AS(nograd::linear(x, zeros({3, 4, 1}), b), "linear: weight must be [out, in], got [3, 4, 1]", Error);
  CHECK_THROWS_WITH_AS(nograd::linear(zeros({2, 5}), w, b),
                       "linear: input [2, 5] does not end in in_features 4 of weight [3, 4]", Error);
  CHECK_THROWS_WITH_AS(nograd::linear(scalar_tensor(1.0), w, b),
                       "linear: input [] does not end in in_features 4 of weight [3, 4]", Error);
  CHECK_THROWS_WITH_AS(nograd::linear(x, w, zeros({4})), "linear: bias [4] does not match out_features 3", Error);
  CHECK_THROWS_WITH_AS(nograd::linear(x, zeros({3, 4}, DType::f64), b), "linear: dtypes differ: x is f32, weight is f64",
                       Error);
  CHECK_THROWS_WITH_AS(nograd::linear(x, w, zeros({3}, DType::bf16)), "linear: dtypes differ: x is f32, bias is bf16",
                       Error);
  CHECK_THROWS_WITH_AS(nograd::linear(x, fake_cuda({3, 4}), b), "linear: devices differ: x is on cpu, weight on cuda:0",
                       Error);
  CHECK_THROWS_WITH_AS(nograd::linear(zeros({2, 4}, DType::i64), zeros({3, 4}, DType::i64), Tensor()),
                       "linear: unsupported dtype i64, expected a floating dtype (f64, f32, f16, bf16)", Error);
}

TEST_CASE("relu_backward passes the grad where the output is positive, in every dtype and layout") {
  const Tensor y = from_vector<double>({0.0, 2.0, -0.0, 1e-300, std::nan(""), 3.0}, {2, 3});
  const Tensor g = from_vector<double>({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, {2, 3});
  CHECK(nograd::relu_backward(g, y).to_vector<double>() == std::vector<double>{0.0, 2.0, 0.0, 4.0, 0.0, 6.0});
  // Equals the where(y > 0, g, 0) chain it replaces, for a large strided f32 input (threaded).
  const Tensor yt = nograd::transpose(nograd::relu(random({300, 200}, 40, DType::f32)), 0, 1);
  const Tensor gt = random({200, 300}, 41, DType::f32);
  const Tensor chain = nograd::where(nograd::gt(yt, 0.0), gt, scalar_tensor(0.0));
  CHECK(nograd::relu_backward(gt, yt).to_vector<float>() == nograd::contiguous(chain).to_vector<float>());
  const Tensor yh = nograd::to_dtype(y, DType::bf16), gh = nograd::to_dtype(g, DType::bf16);
  CHECK(nograd::to_dtype(nograd::relu_backward(gh, yh), DType::f64).to_vector<double>() ==
        std::vector<double>{0.0, 2.0, 0.0, 0.0, 0.0, 6.0});  // 1e-300 is 0 in bf16

  CHECK_THROWS_WITH_AS(nograd::relu_backward(zeros({2, 3}), zeros({1, 3})),
                       "relu_backward: grad [2, 3] and output [1, 3] differ in shape", Error);
  CHECK_THROWS_WITH_AS(nograd::relu_backward(zeros({2}), zeros({2}, DType::f64)),
                       "relu_backward: dtypes differ: f32 [2] vs f64 [2]; cast one with to_dtype", Error);
  CHECK_THROWS_WITH_AS(nograd::relu_backward(zeros({2}, DType::i32), zeros({2}, DType::i32)),
                       "relu_backward: unsupported dtype i32, expected a floating dtype", Error);
  CHECK_THROWS_WITH_AS(nograd::relu_backward(Tensor(), zeros({2})), "relu_backward: got an undefined tensor", Error);
}

TEST_CASE("causal_softmax equals scale, masked_fill(-inf) and softmax, for square and rectangular scores") {
  for (const Shape& shape : {Shape{1, 1}, Shape{5, 5}, Shape{2, 3, 7, 7}, Shape{3, 4, 9}, Shape{2, 1, 6}}) {
    INFO(shape_str(shape));
    const Tensor x = random(shape, 50);
    for (double scale : {1.0, 0.25, -2.0}) {
      const Tensor y = nograd::causal_softmax(x, scale);
      check_close(y, causal_reference(x, scale), 1e-13, 1e-15);
      // Masked entries are exactly 0, not merely small.
      const int64_t tq = shape[shape.size() - 2], tk = shape.back();
      const auto v = y.to_vector<double>();
      for (size_t e = 0; e < v.size(); ++e) {
        const int64_t i = static_cast<int64_t>(e) / tk % tq, j = static_cast<int64_t>(e) % tk;
        if (j > i + tk - tq) CHECK(v[e] == 0.0);
      }
    }
  }
  // f32 through the vectorised rows, threaded (64 * 64 * 64 elements), and from a strided input.
  const Tensor x32 = random({8, 8, 64, 64}, 51, DType::f32);
  check_close(nograd::causal_softmax(x32, 0.125), causal_reference(x32, 0.125), 1e-5, 1e-7);
  const Tensor xt = nograd::transpose(random({3, 6, 6}, 52), 1, 2);
  check_close(nograd::causal_softmax(xt, 0.5), causal_reference(xt, 0.5), 1e-13, 1e-15);
  // Halves compute in f32 and round once.
  const Tensor xh = random({2, 5, 5}, 53, DType::bf16);
  check_close(nograd::causal_softmax(xh, 0.5),
              nograd::to_dtype(nograd::causal_softmax(nograd::to_dtype(xh, DType::f32), 0.5), DType::bf16), 0, 0);
  // A huge score does not overflow: the row max is subtracted.
  const Tensor big = from_vector<double>({1000.0, 0.0, 1000.0, 1000.0}, {2, 2});
  CHECK(nograd::causal_softmax(big, 1.0).to_vector<double>() == std::vector<double>{1.0, 0.0, 0.5, 0.5});
}

TEST_CASE("causal_softmax_backward is scale times the softmax Jacobian-vector product, 0 on the mask") {
  const Tensor x = random({2, 6, 8}, 60), g = random({2, 6, 8}, 61);
  const double scale = 0.3;
  const Tensor y = nograd::causal_softmax(x, scale);
  // The chain it replaces: softmax_backward, then masked_fill's backward (0 on the mask), then * scale.
  const Tensor want = nograd::mul(nograd::softmax_backward(g, y, -1), scale);
  const Tensor got = nograd::causal_softmax_backward(g, y, scale);
  check_close(got, want, 1e-12, 1e-14);
  const auto v = got.to_vector<double>();
  for (size_t e = 0; e < v.size(); ++e)
    if (static_cast<int64_t>(e) % 8 > static_cast<int64_t>(e) / 8 % 6 + 2) CHECK(v[e] == 0.0);
  const Tensor y32 = nograd::to_dtype(y, DType::f32), g32 = nograd::to_dtype(g, DType::f32);
  check_close(nograd::causal_softmax_backward(g32, y32, scale), want, 1e-5, 1e-6);
  const Tensor yh = nograd::to_dtype(y, DType::f16), gh = nograd::to_dtype(g, DType::f16);
  check_close(nograd::causal_softmax_backward(gh, yh, scale), want, 1e-2, 1e-3);
}

TEST_CASE("causal_softmax errors name the op and the values") {
  CHECK_THROWS_WITH_AS(nograd::causal_softmax(Tensor(), 1.0), "causal_softmax: x is undefined", Error);
  CHECK_THROWS_WITH_AS(nograd::causal_softmax(zeros({3}), 1.0),
                       "causal_softmax: x must be [..., Tq, Tk] with at least 2 dims, got [3]", Error);
  CHECK_THROWS_WITH_AS(nograd::causal_softmax(zeros({2, 4, 3}), 1.0),
                       "causal_softmax: x [2, 4, 3] has more queries (4) than keys (3); the first rows would see "
                       "nothing",
                       Error);
  CHECK_THROWS_WITH_AS(nograd::causal_softmax(zeros({2, 2}, DType::i64), 1.0),
                       "causal_softmax: unsupported dtype i64, expected a floating dtype (f64, f32, f16, bf16)", Error);
  CHECK_THROWS_WITH_AS(nograd::causal_softmax(zeros({2, 2}), std::numeric_limits<double>::infinity()),
                       "causal_softmax: scale must be finite, got inf", Error);
  const Tensor y = zeros({3, 3});
  CHECK_THROWS_WITH_AS(nograd::causal_softmax_backward(Tensor(), y, 1.0), "causal_softmax_backward: grad_out is undefined",
                       Error);
  CHECK_THROWS_WITH_AS(nograd::causal_softmax_backward(y, Tensor(), 1.0), "causal_softmax_backward: out is undefined",
                       Error);
  CHECK_THROWS_WITH_AS(nograd::causal_softmax_backward(zeros({3, 3}, DType::f64), y, 1.0),
                       "causal_softmax_backward: grad_out is f64 but out is f32; they must match", Error);
  CHECK_THROWS_WITH_AS(nograd::causal_softmax_backward(zeros({3, 4}), zeros({4, 4}), 1.0),
                       "causal_softmax_backward: grad_out [3, 4] and out [4, 4] differ in shape", Error);
  CHECK_THROWS_WITH_AS(nograd::causal_softmax_backward(zeros({4, 3}), zeros({4, 3}), 1.0),
                       "causal_softmax_backward: out [4, 3] has more queries (4) than keys (3); the first rows would "
                       "see nothing",
                       Error);
}

TEST_CASE("sums and means over leading or middle dims of contiguous tensors match the f64 loop") {
  // [2, 3, 4, 5]: reduce each run of adjacent dims that leaves trailing dims (the column path) and
  // compare with sums taken one element at a time.
  const Shape shape{2, 3, 4, 5};
  const Tensor x = random(shape, 70);
  const auto v = x.to_vector<double>();
  auto reference = [&](const std::vector<int64_t>& dims, bool mean) {
    std::vector<bool> reduced(4, false);
    for (int64_t d : dims) reduced[d] = true;
    Shape out_shape;
    for (int64_t d = 0; d < 4; ++d)
      if (!reduced[d]) out_shape.push_back(shape[d]);
    std::vector<double> out(static_cast<size_t>(shape_numel(out_shape)), 0.0);
    int64_t count = 1;
    for (int64_t d : dims) count *= shape[d];
    for (int64_t e = 0; e < x.numel(); ++e) {
      int64_t rest = e, o = 0, mul = 1;
      for (int64_t d = 3; d >= 0; --d) {
        const int64_t c = rest % shape[d];
        rest /= shape[d];
        if (!reduced[d]) {
          o += c * mul;
          mul *= shape[d];
        }
      }
      out[o] += v[e];
    }
    if (mean)
      for (double& y : out) y /= static_cast<double>(count);
    return from_vector<double>(out, out_shape);
  };
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{0}, {1}, {2}, {0, 1}, {1, 2}, {0, 1, 2}, {-3, -4}}) {
    INFO("dims " << shape_str(dims));
    std::vector<int64_t> normal;
    for (int64_t d : dims) normal.push_back(d < 0 ? d + 4 : d);
    check_close(nograd::sum(x, dims), reference(normal, false), 1e-13, 1e-13);
    check_close(nograd::mean(x, dims), reference(normal, true), 1e-13, 1e-13);
    Shape kept = shape;
    for (int64_t d : normal) kept[d] = 1;
    CHECK(nograd::sum(x, dims, true).shape() == kept);
  }
  // The bias grad of a linear layer: f32 [rows, out] over rows, threaded, accumulated in f64.
  const Tensor g = nograd::add(random({1000, 300}, 71, DType::f32), 1000.0);
  const Tensor want = nograd::sum(nograd::to_dtype(g, DType::f64), {0});
  check_close(nograd::sum(g, {0}), want, 1e-7, 0);
  // Halves round the f64 sum once; an empty reduced dim gives 0 (sum) and NaN (mean).
  const Tensor gh = nograd::to_dtype(nograd::narrow(g, 0, 0, 7), DType::bf16);
  const Tensor want_h = nograd::to_dtype(nograd::sum(nograd::to_dtype(gh, DType::f64), {0}), DType::bf16);
  CHECK(nograd::to_dtype(nograd::sum(gh, {0}), DType::f64).to_vector<double>() ==
        nograd::to_dtype(want_h, DType::f64).to_vector<double>());
  CHECK(nograd::sum(zeros({0, 3}), {0}).to_vector<float>() == std::vector<float>(3, 0.0f));
  for (float m : nograd::mean(zeros({0, 3}), {0}).to_vector<float>()) CHECK(std::isnan(m));
}
