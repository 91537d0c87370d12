// GPU reductions against the CPU path: sum, mean, max, min, argmax and argmin over every dim pattern, in every
// dtype, along short rows (a warp each), long rows (split over blocks) and everything in between.
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"
#include "tests/gpu/gpu_test.h"

using namespace accel;
using namespace accel::gpu_test;

namespace {

// The CPU sums in f64, the GPU in f32 over a tree: the error of an f32 sum of n terms is bounded by
// about n * 2^-24 * sum|x| for a serial order, far less for a tree; this allows sqrt(n) ulps of the
// magnitude, plus the rounding to the output dtype.
double sum_atol(DType dtype, int64_t n, double magnitude) {
  if (dtype == DType::f64) return 1e-12 * magnitude;
  return (std::sqrt(static_cast<double>(n)) * 6e-8 + rtol(dtype)) * magnitude;
}

}  // namespace

TEST_CASE("reduce: sum, mean and max along each path of the kernels") {
  // [outer, inner] shapes that take the warp-per-row kernel, one block per row, and split rows.
  const std::vector<Shape> shapes = {{1, 1},       {7, 1},      {1, 7},       {3000, 33},  {5, 4096},
                                     {5, 4097},    {3, 16384},  {3, 16385},   {2, 1000003}, {1, 1000003},
                                     {4096, 4100}, {100, 7, 5}, {1, 2, 3, 4}};
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    for (const Shape& shape : shapes) {
      const Tensor x = random(shape, dtype, Device::cpu(), 90), xg = nograd::to_device(x, kGpu);
      // The largest sum of |x| over a row: the scale of the rounding error of any row's sum.
      const double magnitude = nograd::max(nograd::sum(nograd::abs(nograd::to_dtype(x, DType::f64)), {-1})).item();
      const int64_t inner = shape.back();
      const std::string what = fmt::format("{} {}", dtype_name(dtype), shape_str(shape));
      check_close(nograd::sum(xg, {-1}), nograd::sum(x, {-1}), 0.0, sum_atol(dtype, inner, magnitude), "sum " + what);
      check_close(nograd::mean(xg, {-1}), nograd::mean(x, {-1}), 0.0, sum_atol(dtype, inner, magnitude) / inner,
                  "mean " + what);
      check_close(nograd::max(xg, {-1}), nograd::max(x, {-1}), 0.0, 0.0, "max " + what);
      check_close(nograd::argmax(xg, -1), nograd::argmax(x, -1), 0.0, 0.0, "argmax " + what);
    }
  }
}

TEST_CASE("reduce: other dims, keepdim and full reductions go through the same rows") {
  const Tensor x = random({6, 50, 7}, DType::f32, Device::cpu(), 91), xg = nograd::to_device(x, kGpu);
  check_close(nograd::sum(xg, {0, 2}, true), nograd::sum(x, {0, 2}, true), 0.0, 1e-4);
  check_close(nograd::mean(xg, {1}), nograd::mean(x, {1}), 0.0, 1e-5);
  check_close(nograd::max(xg, {0}), nograd::max(x, {0}), 0.0, 0.0);
  check_close(nograd::argmax(xg, 1, true), nograd::argmax(x, 1, true), 0.0, 0.0);
  check_close(nograd::sum(xg), nograd::sum(x), 0.0, 1e-3);
  const Tensor t = nograd::transpose(xg, 0, 2);  // a strided input
  check_close(nograd::sum(t, {1}), nograd::sum(nograd::transpose(x, 0, 2), {1}), 0.0, 1e-4);
  check_close(nograd::sum_to_shape(xg, {50, 1}), nograd::sum_to_shape(x, {50, 1}), 0.0, 1e-4);
}

TEST_CASE("reduce: integer and bool sums widen to i64, and max keeps the dtype") {
  for (DType dtype : {DType::i32, DType::i64, DType::boolean}) {
    for (const Shape& shape : std::vector<Shape>{{7, 3}, {2, 100003}, {5000, 10}}) {
      const Tensor x = random(shape, dtype, Device::cpu(), 92), xg = nograd::to_device(x, kGpu);
      const Tensor s = nograd::sum(xg, {-1});
      CHECK(s.dtype() == DType::i64);
      check_close(s, nograd::sum(x, {-1}), 0.0);
      check_close(nograd::max(xg, {-1}), nograd::max(x, {-1}), 0.0);
      check_close(nograd::argmax(xg, -1), nograd::argmax(x, -1), 0.0);
    }
  }
}

TEST_CASE("reduce: NaN wins max and argmax, and ties go to the first index") {
  for (DType dtype : {DType::f32, DType::bf16}) {
    // A NaN late in a long row (split path) and in a short one, and rows of equal maxima.
    Tensor x = zeros({3, 20000}, DType::f32);
    float* p = x.data<float>();
    p[0 * 20000 + 17000] = NAN;
    p[0 * 20000 + 19000] = NAN;
    p[0 * 20000 + 5] = 7.0f;
    p[1 * 20000 + 3] = 2.0f;
    p[1 * 20000 + 15000] = 2.0f;
    for (int j = 0; j < 20000; ++j) p[2 * 20000 + j] = -1.0f;
    const Tensor xd = nograd::to_dtype(x, dtype), xg = nograd::to_device(xd, kGpu);
    check_close(nograd::max(xg, {1}), nograd::max(xd, {1}), 0.0);
    CHECK(nograd::argmax(xg, 1).to_vector<int64_t>() == std::vector<int64_t>{17000, 3, 0});
    CHECK(nograd::argmax(xg, 1).to_vector<int64_t>() == nograd::argmax(xd, 1).to_vector<int64_t>());
    const Tensor short_rows = nograd::narrow(xg, 1, 16990, 20);
    CHECK(nograd::argmax(short_rows, 1).to_vector<int64_t>() == std::vector<int64_t>{10, 0, 0});
  }
}

TEST_CASE("reduce: min and argmin (-max(-t) for floating dtypes, a host copy for the others) equal the CPU's") {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64, DType::i32, DType::i64, DType::boolean}) {
    for (const Shape& shape : std::vector<Shape>{{7, 3}, {5, 4097}, {2, 100003}}) {
      const Tensor x = random(shape, dtype, Device::cpu(), 93), xg = nograd::to_device(x, kGpu);
      const std::string what = fmt::format("{} {}", dtype_name(dtype), shape_str(shape));
      const Tensor m = nograd::min(xg, {-1});
      CHECK(m.device() == kGpu);
      check_close(m, nograd::min(x, {-1}), 0.0, 0.0, "min " + what);
      check_close(nograd::argmin(xg, -1), nograd::argmin(x, -1), 0.0, 0.0, "argmin " + what);
      check_close(nograd::min(xg, {0}, true), nograd::min(x, {0}, true), 0.0, 0.0, "min dim 0 " + what);
    }
  }
  Tensor x = from_vector<float>({3, NAN, -1, -1, 2, -1}, {2, 3});
  const Tensor xg = nograd::to_device(x, kGpu);
  check_close(nograd::min(xg, {1}), nograd::min(x, {1}), 0.0);
  CHECK(nograd::argmin(xg, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
}

TEST_CASE("reduce: empty rows sum to zero and empty outputs launch nothing") {
  const Tensor e = empty({4, 0}, DType::f32, kGpu);
  check_close(nograd::sum(e, {1}), zeros({4}), 0.0);
  CHECK(nograd::sum(empty({0, 3}, DType::f32, kGpu), {1}).numel() == 0);
  CHECK(std::isnan(nograd::mean(e, {1}).to_vector<float>()[0]));
}
