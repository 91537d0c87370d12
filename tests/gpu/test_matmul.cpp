// GPU matmul through cuBLASLt against an f64 reference: f32/f16/bf16/f64, transposed and sliced
// operands read in place, operands that must be copied, batched and broadcast batches, K = 0, and
// the bias epilogue (with an aligned bias, and one at an odd offset).
#include "tensor/cuda/matmul.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/matmul.h"
#include "tensor/nograd/views.h"
#include "tests/gpu/gpu_test.h"

using namespace accel;
using namespace accel::gpu_test;

namespace {

Shape with(Shape batch, std::initializer_list<int64_t> tail) {
  batch.insert(batch.end(), tail);
  return batch;
}

// out = a @ b as nograd::matmul calls it: a [..., M, K] and b [..., K, N] with broadcast batch dims,
// expanded to the common batch shape; out is a fresh contiguous tensor.
Tensor gpu_matmul(const Tensor& a, const Tensor& b, const Tensor* bias = nullptr) {
  const Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  const Shape batch = broadcast_shapes("gpu_matmul", ba, bb);
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  Tensor out = empty(with(batch, {m, n}), a.dtype(), a.device());
  const Tensor ae = nograd::expand(a, with(batch, {m, k})), be = nograd::expand(b, with(batch, {k, n}));
  if (bias != nullptr) cuda::matmul_bias(out, ae, be, *bias);
  else cuda::matmul(out, ae, be);
  return out;
}

struct Reference {
  Tensor value;      // f64, a @ b (+ bias)
  Tensor magnitude;  // f64, |a| @ |b| (+ |bias|): the scale of the rounding error
};

// Naive f64 product of the CPU copies, broadcasting batch dims.
Reference reference(const Tensor& a_in, const Tensor& b_in, const Tensor* bias_in = nullptr) {
  const Shape ba(a_in.shape().begin(), a_in.shape().end() - 2), bb(b_in.shape().begin(), b_in.shape().end() - 2);
  const Shape batch = broadcast_shapes("reference", ba, bb);
  const int64_t m = a_in.size(-2), k = a_in.size(-1), n = b_in.size(-1);
  const Tensor a = nograd::contiguous(nograd::expand(nograd::to_dtype(nograd::to_device(a_in, Device::cpu()), DType::f64),
                                               with(batch, {m, k})));
  const Tensor b = nograd::contiguous(nograd::expand(nograd::to_dtype(nograd::to_device(b_in, Device::cpu()), DType::f64),
                                               with(batch, {k, n})));
  std::vector<double> bias(static_cast<size_t>(n), 0.0);
  if (bias_in != nullptr) bias = nograd::to_dtype(nograd::to_device(*bias_in, Device::cpu()), DType::f64).to_vector<double>();
  Reference r{zeros(with(batch, {m, n}), DType::f64), zeros(with(batch, {m, n}), DType::f64)};
  const double* pa = a.data<double>();
  const double* pb = b.data<double>();
  double* pv = r.value.data<double>();
  double* pm = r.magnitude.data<double>();
  const int64_t batches = shape_numel(batch);
  for (int64_t t = 0; t < batches; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double v = bias[static_cast<size_t>(j)], mag = std::fabs(bias[static_cast<size_t>(j)]);
        for (int64_t q = 0; q < k; ++q) {
          const double x = pa[(t * m + i) * k + q] * pb[(t * k + q) * n + j];
          v += x;
          mag += std::fabs(x);
        }
        pv[(t * m + i) * n + j] = v;
        pm[(t * m + i) * n + j] = mag;
      }
  return r;
}

// |got - want| <= (K u + rtol) * magnitude elementwise, u the unit roundoff of the accumulation.
void check_product(const Tensor& got, const Reference& want, int64_t k, const std::string& what) {
  INFO(what);
  const double u = got.dtype() == DType::f64 ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
  const double tol = static_cast<double>(k + 2) * u + rtol(got.dtype());
  const std::vector<double> g = nograd::to_dtype(nograd::to_device(got, Device::cpu()), DType::f64).to_vector<double>();
  const std::vector<double> w = want.value.to_vector<double>(), mag = want.magnitude.to_vector<double>();
  REQUIRE(g.size() == w.size());
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::fabs(g[i] - w[i]) <= tol * mag[i] + 1e-300) && bad++ == 0) first = static_cast<int64_t>(i);
  if (bad > 0)
    FAIL_CHECK(fmt::format("{} of {} elements differ; first at {}: got {} want {} (scale {})", bad, g.size(), first,
                           g[static_cast<size_t>(first)], w[static_cast<size_t>(first)], mag[static_cast<size_t>(first)]));
}

const DType kGemmDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::f64};

}  // namespace

TEST_CASE("matmul: every layout of the operands, odd sizes, every dtype") {
  const int64_t sizes[][3] = {{1, 1, 1}, {7, 5, 3}, {64, 128, 32}, {257, 129, 65}, {1000, 37, 3}};
  for (DType dtype : kGemmDTypes) {
    for (const auto& s : sizes) {
      const int64_t m = s[0], k = s[1], n = s[2];
      const Tensor a = random({m, k}, dtype, kGpu, 100), b = random({k, n}, dtype, kGpu, 101);
      const Tensor at = nograd::transpose(random({k, m}, dtype, kGpu, 102), 0, 1);  // column-major [m, k]
      const Tensor bt = nograd::transpose(random({n, k}, dtype, kGpu, 103), 0, 1);
      for (const Tensor& x : {a, at})
        for (const Tensor& y : {b, bt})
          check_product(gpu_matmul(x, y), reference(x, y), k,
                        fmt::format("{} [{}, {}] x [{}, {}], a {}, b {}", dtype_name(dtype), m, k, k, n,
                                    x.is_contiguous() ? "row-major" : "transposed",
                                    y.is_contiguous() ? "row-major" : "transposed"));
    }
  }
  MESSAGE(fmt::format("{} GEMM calls so far went to classic cuBLAS (cuBLASLt declined their layout)",
                      cuda::classic_gemm_calls()));
}

TEST_CASE("matmul: sliced operands at odd offsets, and operands with no unit stride") {
  for (DType dtype : kGemmDTypes) {
    const Tensor wide = random({65, 131}, dtype, kGpu, 110);
    const Tensor a = nograd::narrow(wide, 1, 1, 127);                 // [65, 127], misaligned, ld 131
    const Tensor b = nograd::narrow(random({129, 40}, dtype, kGpu, 111), 0, 2, 127);  // [127, 40]
    check_product(gpu_matmul(a, b), reference(a, b), 127, fmt::format("sliced {}", dtype_name(dtype)));
    const Tensor strided = nograd::slice(nograd::slice(random({130, 80}, dtype, kGpu, 112), 0, 0, 130, 2), 1, 0, 80, 2);
    const Tensor c = random({40, 9}, dtype, kGpu, 113);          // strided is [65, 40] with no unit stride
    check_product(gpu_matmul(strided, c), reference(strided, c), 40, fmt::format("copied {}", dtype_name(dtype)));
  }
}

TEST_CASE("matmul: batches, broadcast batches and batches that do not coalesce") {
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Tensor a = random({3, 33, 17}, dtype, kGpu, 120), b = random({3, 17, 9}, dtype, kGpu, 121);
    check_product(gpu_matmul(a, b), reference(a, b), 17, "batched");
    const Tensor shared = random({33, 17}, dtype, kGpu, 122);  // broadcast over the batch (stride 0)
    check_product(gpu_matmul(shared, b), reference(shared, b), 17, "broadcast a");
    const Tensor b4 = random({2, 1, 17, 9}, dtype, kGpu, 123), a4 = random({2, 3, 33, 17}, dtype, kGpu, 124);
    check_product(gpu_matmul(a4, b4), reference(a4, b4), 17, "broadcast inner batch dim of b");
    // Batch dims in swapped order: no single batch stride covers them.
    const Tensor ap = nograd::permute(random({3, 2, 33, 17}, dtype, kGpu, 125), {1, 0, 2, 3});
    const Tensor bp = random({2, 3, 17, 9}, dtype, kGpu, 126);
    check_product(gpu_matmul(ap, bp), reference(ap, bp), 17, "permuted batch dims");
    // Transposed matrices inside a batch.
    const Tensor at = nograd::transpose(random({3, 17, 33}, dtype, kGpu, 127), 1, 2);
    check_product(gpu_matmul(at, b), reference(at, b), 17, "batched, a transposed");
  }
}

TEST_CASE("matmul: K = 0 gives zeros (and the bias), empty outputs launch nothing") {
  const Tensor a = empty({4, 0}, DType::f32, kGpu), b = empty({0, 3}, DType::f32, kGpu);
  check_close(gpu_matmul(a, b), zeros({4, 3}), 0.0);
  const Tensor bias = nograd::to_device(from_vector<float>({1, 2, 3}), kGpu);
  check_close(gpu_matmul(a, b, &bias), nograd::contiguous(nograd::expand(from_vector<float>({1, 2, 3}), {4, 3})), 0.0);
  CHECK(gpu_matmul(empty({0, 5}, DType::f32, kGpu), random({5, 3}, DType::f32, kGpu, 130)).numel() == 0);
}

TEST_CASE("matmul: the bias epilogue adds one value per output column") {
  for (DType dtype : kGemmDTypes) {
    const Tensor a = random({77, 64}, dtype, kGpu, 140), w = random({64, 48}, dtype, kGpu, 141);
    const Tensor bias = random({48}, dtype, kGpu, 142);
    check_product(gpu_matmul(a, w, &bias), reference(a, w, &bias), 64, fmt::format("bias {}", dtype_name(dtype)));
    // As the Linear layer will call it: x @ weight^T with weight [out, in], over a batch.
    const Tensor x = random({2, 5, 64}, dtype, kGpu, 143), weight = random({48, 64}, dtype, kGpu, 144);
    const Tensor wt = nograd::transpose(weight, 0, 1);
    check_product(gpu_matmul(x, wt, &bias), reference(x, wt, &bias), 64, fmt::format("linear {}", dtype_name(dtype)));
  }
}

TEST_CASE("matmul: a bias at an offset of one element (a view into a flat buffer, as ZeRO's units are)") {
  // The epilogue may assume a 16-byte aligned bias; matmul_bias copies one that is not.
  for (DType dtype : kGemmDTypes) {
    const Tensor a = random({40, 64}, dtype, kGpu, 150), w = random({64, 48}, dtype, kGpu, 151);
    const Tensor flat = random({49}, dtype, kGpu, 152);
    const Tensor bias = nograd::narrow(flat, 0, 1, 48);
    check_product(gpu_matmul(a, w, &bias), reference(a, w, &bias), 64,
                  fmt::format("bias at offset 1, {}", dtype_name(dtype)));
  }
}

TEST_CASE("matmul: matmul_bias checks its operands") {
  const Tensor a = zeros({4, 3}, DType::f32, kGpu), b = zeros({3, 5}, DType::f32, kGpu);
  const Tensor out = empty({4, 5}, DType::f32, kGpu);
  CHECK(error_of([&] { cuda::matmul_bias(out, a, b, zeros({4}, DType::f32, kGpu)); }) ==
        "matmul_bias: expected [..., M, K] x [..., K, N] + [N] -> [..., M, N], got [4, 3] x [3, 5] + [4] -> [4, 5]");
  CHECK(error_of([&] { cuda::matmul_bias(out, a, b, zeros({5}, DType::bf16, kGpu)); }) ==
        "matmul_bias: every operand must be f32 on cuda:0, got bf16 on cuda:0: [4, 3] x [3, 5] + [5] -> [4, 5]");
}
