// nograd::matmul against a naive triple loop in f64: odd sizes, transposed, sliced, batched and
// broadcast operands, 1-d vectors, f16/bf16, the layout chosen for Eigen, and every error message.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>

#include "accel.h"
#include "tensor/cpu/matmul.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/matmul.h"
#include "tensor/nograd/views.h"

using namespace accel;

namespace {

Shape cat_shape(Shape head, const Shape& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

// numpy's matmul by its definition, in f64: vectors lifted to [1, K] / [K, 1], batch dims broadcast,
// then sum_k a[i, k] * b[k, j] for every batch entry.
Tensor reference(const Tensor& a, const Tensor& b) {
  const Tensor a2 = a.dim() == 1 ? nograd::unsqueeze(a, 0) : a;
  const Tensor b2 = b.dim() == 1 ? nograd::unsqueeze(b, 1) : b;
  const int64_t m = a2.size(-2), k = a2.size(-1), n = b2.size(-1);
  const Shape batch = broadcast_shapes("reference", Shape(a2.shape().begin(), a2.shape().end() - 2),
                                       Shape(b2.shape().begin(), b2.shape().end() - 2));
  const auto av = nograd::to_dtype(nograd::contiguous(nograd::expand(a2, cat_shape(batch, {m, k}))), DType::f64).to_vector<double>();
  const auto bv = nograd::to_dtype(nograd::contiguous(nograd::expand(b2, cat_shape(batch, {k, n}))), DType::f64).to_vector<double>();
  const int64_t count = shape_numel(batch);
  std::vector<double> out(static_cast<size_t>(count * m * n));
  for (int64_t p = 0; p < count; ++p)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q) acc += av[p * m * k + i * k + q] * bv[p * k * n + q * n + j];
        out[p * m * n + i * n + j] = acc;
      }
  Shape shape = batch;
  if (a.dim() > 1) shape.push_back(m);
  if (b.dim() > 1) shape.push_back(n);
  return from_vector<double>(out, shape);
}

// |got - want| <= atol + rtol * |want| everywhere, with got in any floating dtype.
void check_close(const Tensor& got, const Tensor& want, double rtol, double atol) {
  REQUIRE(got.shape() == want.shape());
  CHECK(got.is_contiguous());
  const auto g = nograd::to_dtype(got, DType::f64).to_vector<double>();
  const auto w = want.to_vector<double>();
  int bad = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(g[i] - w[i]) <= atol + rtol * std::abs(w[i])) && bad++ < 5)
      FAIL_CHECK("element " << i << " of " << shape_str(got.shape()) << ": got " << g[i] << ", want " << w[i]);
  CHECK(bad == 0);
}

Tensor random(const Shape& shape, uint64_t seed, DType dtype = DType::f64) {
  Generator gen(seed);
  return nograd::to_dtype(randn(shape, gen, DType::f64), dtype);
}

void check_f64(const Tensor& a, const Tensor& b) {
  INFO(shape_str(a.shape()) << " x " << shape_str(b.shape()));
  check_close(nograd::matmul(a, b), reference(a, b), 1e-12, 1e-12);
}

// A tensor adopting host memory but labelled as a CUDA tensor, so device checks can be tested
// without a GPU. Nothing may read through it.
Tensor fake_cuda(const Shape& shape) {
  static float dummy[64];
  auto storage = std::make_shared<Storage>(dummy, sizeof dummy, Device::cuda(0), [](void*) {});
  return Tensor::make_view(storage, shape, contiguous_strides(shape), 0, DType::f32);
}

}  // namespace

TEST_CASE("2-d products match the triple loop at odd sizes") {
  const std::vector<std::array<int64_t, 3>> sizes = {{7, 13, 5}, {1, 1, 1}, {3, 1, 4}, {1, 9, 1},
                                                     {17, 33, 9}, {64, 65, 66}, {97, 131, 89}};
  uint64_t seed = 1;
  for (const auto& [m, k, n] : sizes) {
    const Tensor a = random({m, k}, seed++);
    check_f64(a, random({k, n}, seed++));
  }
}

TEST_CASE("f32 products agree with the f64 loop") {
  Tensor a = random({33, 70}, 2, DType::f32), b = random({70, 19}, 3, DType::f32);
  Tensor out = nograd::matmul(a, b);
  CHECK(out.dtype() == DType::f32);
  check_close(out, reference(a, b), 1e-5, 1e-4);
  // Large enough that Eigen splits it over the OpenMP threads.
  Tensor c = random({150, 200}, 4, DType::f32), d = random({200, 130}, 5, DType::f32);
  check_close(nograd::matmul(c, d), reference(c, d), 1e-5, 1e-4);
}

TEST_CASE("empty dims give empty or zero results") {
  Tensor z = nograd::matmul(random({3, 0}, 6), random({0, 4}, 7));
  CHECK(z.shape() == Shape{3, 4});
  CHECK(z.to_vector<double>() == std::vector<double>(12, 0.0));
  CHECK(nograd::matmul(random({0, 5}, 8), random({5, 4}, 9)).shape() == Shape{0, 4});
  CHECK(nograd::matmul(random({2, 0, 5}, 8), random({5, 4}, 9)).shape() == Shape{2, 0, 4});
  CHECK(nograd::matmul(random({0, 3, 5}, 8), random({5, 4}, 9)).shape() == Shape{0, 3, 4});
}

TEST_CASE("gemm_layout maps strided matrices for Eigen without copying") {
  using cpu::GemmLayout;
  auto check_layout = [](const Tensor& t, GemmLayout layout, int64_t outer) {
    const cpu::MatrixLayout got = cpu::gemm_layout(t);
    CHECK(got.layout == layout);
    CHECK(got.outer_stride == outer);
  };
  Tensor w = random({6, 4}, 10);                            // [N, K] as a Linear weight
  check_layout(w, GemmLayout::row_major, 4);
  check_layout(nograd::transpose(w, 0, 1), GemmLayout::col_major, 4);  // w^T: read in place
  check_layout(nograd::narrow(w, 1, 1, 2), GemmLayout::row_major, 4);  // a column block keeps its row stride
  check_layout(nograd::narrow(nograd::transpose(w, 0, 1), 0, 1, 2), GemmLayout::col_major, 4);
  check_layout(nograd::slice(w, 1, 0, 4, 2), GemmLayout::copy, 0);     // no unit stride: copied
  Tensor x = random({3, 5, 4}, 11);
  check_layout(nograd::transpose(x, -1, -2), GemmLayout::col_major, 4);  // a batch of transposes
  check_layout(nograd::permute(x, {1, 0, 2}), GemmLayout::row_major, 20);
  // Size-1 dims may have any stride; a row or a column is read in place either way.
  check_layout(nograd::unsqueeze(random({7}, 12), 0), GemmLayout::row_major, 7);
  check_layout(nograd::unsqueeze(random({7}, 12), 1), GemmLayout::row_major, 1);
  CHECK(cpu::gemm_layout(1, 5, 0, 3).layout == GemmLayout::col_major);
  // Overlapping rows (a stride-0 broadcast inside the matrix) are copied, not handed to BLAS.
  CHECK(cpu::gemm_layout(4, 3, 0, 1).layout == GemmLayout::copy);
  CHECK(cpu::gemm_layout(4, 3, 2, 1).layout == GemmLayout::copy);
}

TEST_CASE("transposed, sliced and stepped operands give the same product") {
  Tensor x = random({7, 13}, 13), w = random({5, 13}, 14);
  check_f64(x, nograd::transpose(w, 0, 1));                           // x @ w^T, as Linear does
  check_f64(nograd::transpose(random({13, 7}, 15), 0, 1), nograd::transpose(w, 0, 1));
  check_f64(nograd::narrow(random({7, 20}, 16), 1, 3, 13), nograd::narrow(random({13, 9}, 17), 1, 2, 5));
  check_f64(nograd::slice(random({7, 26}, 18), 1, 0, 26, 2), nograd::slice(random({26, 10}, 19), 0, 1, 26, 2));
  check_f64(nograd::expand(random({1, 13}, 20), {7, 13}), nograd::transpose(w, 0, 1));  // stride-0 rows: copied
  // The same values whichever way they are laid out.
  Tensor wt = nograd::transpose(w, 0, 1);
  CHECK(nograd::matmul(x, wt).to_vector<double>() == nograd::matmul(x, nograd::contiguous(wt)).to_vector<double>());
}

TEST_CASE("batched products broadcast their batch dims") {
  check_f64(random({5, 7, 13}, 21), random({5, 13, 6}, 22));
  check_f64(random({2, 3, 7, 13}, 23), random({13, 5}, 24));        // folded into one [42, 13] GEMM
  check_f64(random({7, 13}, 25), random({2, 3, 13, 5}, 26));
  check_f64(random({4, 1, 7, 13}, 27), random({3, 13, 5}, 28));     // -> [4, 3, 7, 5]
  check_f64(random({1, 3, 4, 2}, 29), random({2, 1, 2, 3}, 30));
  check_f64(nograd::transpose(random({3, 13, 7}, 31), -1, -2), nograd::transpose(random({3, 5, 13}, 32), -1, -2));
  check_f64(nograd::permute(random({4, 3, 7, 13}, 33), {1, 0, 2, 3}), random({13, 5}, 34));  // not foldable
  check_f64(nograd::expand(random({1, 7, 13}, 35), {4, 7, 13}), random({4, 13, 5}, 36));
  check_f64(random({64, 16, 24}, 37), random({64, 24, 13}, 38));    // many small: threads over the batch
  check_f64(random({4, 50, 60}, 39), random({4, 60, 70}, 40));      // few large: Eigen threads each
  check_f64(random({3, 1, 13}, 41), random({13, 5}, 42));           // M = 1 rows folded
  check_f64(random({3, 7, 1}, 43), random({1, 5}, 44));             // K = 1
}

TEST_CASE("1-d operands act as numpy vectors") {
  Tensor v = random({13}, 45), m = random({13, 5}, 46), r = random({7, 13}, 47);
  CHECK(nograd::matmul(v, m).shape() == Shape{5});
  check_f64(v, m);
  CHECK(nograd::matmul(r, v).shape() == Shape{7});
  check_f64(r, v);
  Tensor dot = nograd::matmul(v, v);
  CHECK(dot.dim() == 0);
  check_f64(v, v);
  CHECK(nograd::matmul(random({2, 3, 13}, 48), v).shape() == Shape{2, 3});
  check_f64(random({2, 3, 13}, 48), v);
  CHECK(nograd::matmul(v, random({2, 13, 5}, 49)).shape() == Shape{2, 5});
  check_f64(v, random({2, 13, 5}, 49));
  check_f64(nograd::slice(random({26}, 50), 0, 0, 26, 2), m);
}

TEST_CASE("f16 and bf16 multiply in f32 and round once") {
  for (DType dtype : {DType::f16, DType::bf16}) {
    INFO(dtype_name(dtype));
    // The unit roundoff of the storage type: the only error beyond f32 accumulation.
    const double u = dtype == DType::f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    Tensor a = random({7, 13}, 51, dtype), b = random({13, 5}, 52, dtype);
    Tensor out = nograd::matmul(a, b);
    CHECK(out.dtype() == dtype);
    check_close(out, reference(a, b), u, 1e-4);
    Tensor f32 = nograd::matmul(nograd::to_dtype(a, DType::f32), nograd::to_dtype(b, DType::f32));
    CHECK(nograd::to_dtype(out, DType::f32).to_vector<float>() ==
          nograd::to_dtype(nograd::to_dtype(f32, dtype), DType::f32).to_vector<float>());
    Tensor x = random({3, 9, 40}, 53, dtype), w = random({24, 40}, 54, dtype);
    check_close(nograd::matmul(x, nograd::transpose(w, 0, 1)), reference(x, nograd::transpose(w, 0, 1)), u, 1e-4);
    check_close(nograd::matmul(random({64, 16, 24}, 55, dtype), random({64, 24, 13}, 56, dtype)),
                reference(random({64, 16, 24}, 55, dtype), random({64, 24, 13}, 56, dtype)), u, 1e-4);
    check_close(nograd::matmul(nograd::slice(random({7, 26}, 57, dtype), 1, 0, 26, 2), random({13}, 58, dtype)),
                reference(nograd::slice(random({7, 26}, 57, dtype), 1, 0, 26, 2), random({13}, 58, dtype)), u, 1e-4);
  }
}

TEST_CASE("matmul errors name the op and the shapes") {
  CHECK_THROWS_WITH_AS(nograd::matmul(zeros({32, 64}), zeros({32, 10})), "matmul: inner dims differ: [32, 64] x [32, 10]",
                       Error);
  CHECK_THROWS_WITH_AS(nograd::matmul(zeros({3}), zeros({4})), "matmul: inner dims differ: [3] x [4]", Error);
  CHECK_THROWS_WITH_AS(nograd::matmul(zeros({2, 3, 4}), zeros({5})), "matmul: inner dims differ: [2, 3, 4] x [5]", Error);
  CHECK_THROWS_WITH_AS(nograd::matmul(zeros({2, 3}), zeros({3, 4}, DType::f64)),
                       "matmul: dtypes differ: f32 [2, 3] vs f64 [3, 4]; cast one with to_dtype", Error);
  CHECK_THROWS_WITH_AS(nograd::matmul(zeros({2, 3}), fake_cuda({3, 4})), "matmul: devices differ: cpu vs cuda:0", Error);
  CHECK_THROWS_WITH_AS(nograd::matmul(scalar_tensor(2.0), zeros({3})),
                       "matmul: 0-d operand in [] x [3]; expected at least 1 dim each (use mul for scalars)", Error);
  CHECK_THROWS_WITH_AS(nograd::matmul(zeros({3, 3}), scalar_tensor(2.0)),
                       "matmul: 0-d operand in [3, 3] x []; expected at least 1 dim each (use mul for scalars)", Error);
  CHECK_THROWS_WITH_AS(nograd::matmul(zeros({2, 3}, DType::i64), zeros({3, 4}, DType::i64)),
                       "matmul: unsupported dtype i64, expected a floating dtype (f64, f32, f16, bf16)", Error);
  CHECK_THROWS_WITH_AS(nograd::matmul(zeros({2, 3}, DType::boolean), zeros({3, 4}, DType::boolean)),
                       "matmul: unsupported dtype bool, expected a floating dtype (f64, f32, f16, bf16)", Error);
  CHECK_THROWS_WITH_AS(nograd::matmul(zeros({2, 4, 5}), zeros({3, 5, 6})),
                       "matmul: batch dims [2] and [3] cannot broadcast: [2, 4, 5] x [3, 5, 6]", Error);
  CHECK_THROWS_WITH_AS(nograd::matmul(zeros({2, 3, 4, 5}), zeros({4, 5, 6})),
                       "matmul: batch dims [2, 3] and [4] cannot broadcast: [2, 3, 4, 5] x [4, 5, 6]", Error);
  CHECK_THROWS_WITH_AS(nograd::matmul(Tensor(), zeros({3})), "matmul: got an undefined tensor", Error);
}
