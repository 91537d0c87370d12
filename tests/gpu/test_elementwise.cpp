// GPU elementwise ops against the CPU path on the same random inputs: every op and dtype, odd sizes
// (1, 7, 1000003), and non-contiguous operands (transposes, slices, broadcasts, misaligned views).
#include "kernels/elementwise_math.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"
#include "tests/gpu/gpu_test.h"

using namespace accel;
using namespace accel::gpu_test;

namespace {

struct Pair {
  Tensor cpu, gpu;
};

Pair make(const Shape& shape, DType dtype, uint64_t seed) {
  const Tensor c = random(shape, dtype, Device::cpu(), seed);
  return {c, nograd::to_device(c, kGpu)};
}

// Layout variants of an operand of logical shape [rows, cols], each on both devices.
std::vector<std::pair<std::string, Pair>> layouts(int64_t rows, int64_t cols, DType dtype, uint64_t seed) {
  std::vector<std::pair<std::string, Pair>> out;
  const Pair base = make({rows, cols}, dtype, seed);
  out.push_back({"contiguous", base});
  const Pair t = make({cols, rows}, dtype, seed + 1);
  out.push_back({"transposed", {nograd::transpose(t.cpu, 0, 1), nograd::transpose(t.gpu, 0, 1)}});
  const Pair wide = make({rows, cols + 3}, dtype, seed + 2);
  out.push_back({"sliced at an odd offset",
                 {nograd::narrow(wide.cpu, 1, 1, cols), nograd::narrow(wide.gpu, 1, 1, cols)}});
  const Pair row = make({cols}, dtype, seed + 3);
  out.push_back({"broadcast row", {nograd::expand(row.cpu, {rows, cols}), nograd::expand(row.gpu, {rows, cols})}});
  return out;
}

const BinaryOp kBinary[] = {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div,
                            BinaryOp::pow, BinaryOp::maximum, BinaryOp::minimum};
const UnaryOp kUnary[] = {UnaryOp::neg, UnaryOp::exp, UnaryOp::log, UnaryOp::sqrt, UnaryOp::abs,
                          UnaryOp::tanh, UnaryOp::sigmoid, UnaryOp::relu, UnaryOp::gelu};
const CompareOp kCompare[] = {CompareOp::eq, CompareOp::ne, CompareOp::lt, CompareOp::le, CompareOp::gt, CompareOp::ge};

Tensor run_binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  switch (op) {
    case BinaryOp::add: return nograd::add(a, b);
    case BinaryOp::sub: return nograd::sub(a, b);
    case BinaryOp::mul: return nograd::mul(a, b);
    case BinaryOp::div: return nograd::div(a, b);
    case BinaryOp::pow: return nograd::pow(a, b);
    case BinaryOp::maximum: return nograd::maximum(a, b);
    case BinaryOp::minimum: return nograd::minimum(a, b);
  }
  return {};
}

Tensor run_unary(UnaryOp op, const Tensor& t) {
  switch (op) {
    case UnaryOp::neg: return nograd::neg(t);
    case UnaryOp::exp: return nograd::exp(t);
    case UnaryOp::log: return nograd::log(t);
    case UnaryOp::sqrt: return nograd::sqrt(t);
    case UnaryOp::abs: return nograd::abs(t);
    case UnaryOp::tanh: return nograd::tanh(t);
    case UnaryOp::sigmoid: return nograd::sigmoid(t);
    case UnaryOp::relu: return nograd::relu(t);
    case UnaryOp::gelu: return nograd::gelu(t);
  }
  return {};
}

Tensor run_compare(CompareOp op, const Tensor& a, const Tensor& b) {
  switch (op) {
    case CompareOp::eq: return nograd::eq(a, b);
    case CompareOp::ne: return nograd::ne(a, b);
    case CompareOp::lt: return nograd::lt(a, b);
    case CompareOp::le: return nograd::le(a, b);
    case CompareOp::gt: return nograd::gt(a, b);
    case CompareOp::ge: return nograd::ge(a, b);
  }
  return {};
}

// Transcendental results also get an absolute tolerance of the same size: the GPU's and glibc's
// tanh/exp differ by an ulp or two, and gelu's 1 + tanh(...) cancels for negative inputs, so there
// the difference is small only in absolute terms.
double atol(UnaryOp op, DType dtype) { return needs_floating(op) ? rtol(dtype) : 0.0; }

bool valid(BinaryOp op, DType dtype) { return is_floating(dtype) || !needs_floating(op); }
bool valid(UnaryOp op, DType dtype) { return is_floating(dtype) || !needs_floating(op); }

}  // namespace

TEST_CASE("elementwise: binary ops match the CPU on contiguous inputs of odd sizes") {
  for (DType dtype : numeric_dtypes()) {
    for (int64_t n : {1, 7, 1000003}) {
      const Pair a = make({n}, dtype, 10), b = make({n}, dtype, 11);
      for (BinaryOp op : kBinary) {
        if (!valid(op, dtype)) continue;
        if (n > 7 && op == BinaryOp::pow && dtype == DType::f64) continue;  // slow on the CPU, covered below
        check_close(run_binary(op, a.gpu, b.gpu), run_binary(op, a.cpu, b.cpu), rtol(dtype), 0.0,
                    fmt::format("{} {} n={}", op_name(op), dtype_name(dtype), n));
      }
    }
  }
}

TEST_CASE("elementwise: binary ops on transposed, sliced and broadcast operands") {
  for (DType dtype : {DType::f32, DType::bf16, DType::f64, DType::i32}) {
    const auto as = layouts(37, 129, dtype, 20), bs = layouts(37, 129, dtype, 30);
    for (const auto& [na, a] : as) {
      for (const auto& [nb, b] : bs) {
        for (BinaryOp op : {BinaryOp::add, BinaryOp::mul, BinaryOp::maximum, BinaryOp::div}) {
          if (!valid(op, dtype)) continue;
          check_close(run_binary(op, a.gpu, b.gpu), run_binary(op, a.cpu, b.cpu), rtol(dtype), 0.0,
                      fmt::format("{} {}: {} x {}", op_name(op), dtype_name(dtype), na, nb));
        }
      }
    }
    // A scalar operand (the scalar forms of the ops) and a column broadcast against a row.
    const Pair col = make({37, 1}, dtype, 40), row = make({1, 129}, dtype, 41);
    check_close(nograd::sub(col.gpu, row.gpu), nograd::sub(col.cpu, row.cpu), rtol(dtype), 0.0, "column - row");
    check_close(nograd::mul(row.gpu, 3.0), nograd::mul(row.cpu, 3.0), rtol(dtype), 0.0, "row * 3");
    check_close(nograd::add(row.gpu, -2.0), nograd::add(row.cpu, -2.0), rtol(dtype), 0.0, "row + -2");
  }
}

TEST_CASE("elementwise: unary ops match the CPU in every dtype") {
  for (DType dtype : numeric_dtypes()) {
    for (int64_t n : {1, 7, 1000003}) {
      const Pair x = make({n}, dtype, 50);
      for (UnaryOp op : kUnary) {
        if (!valid(op, dtype)) continue;
        // log and sqrt of negative inputs give NaN on both sides, which check_close accepts.
        check_close(run_unary(op, x.gpu), run_unary(op, x.cpu), rtol(dtype), atol(op, dtype),
                    fmt::format("{} {} n={}", op_name(op), dtype_name(dtype), n));
      }
    }
    for (const auto& [name, x] : layouts(33, 65, dtype, 60))
      for (UnaryOp op : {UnaryOp::neg, UnaryOp::abs, UnaryOp::relu})
        check_close(run_unary(op, x.gpu), run_unary(op, x.cpu), rtol(dtype), 0.0,
                    fmt::format("{} {} {}", op_name(op), dtype_name(dtype), name));
  }
}

TEST_CASE("elementwise: unary math near its edges") {
  const Tensor x = from_vector<float>({-100.0f, -20.0f, -1e-3f, 0.0f, 1e-3f, 5.0f, 20.0f, 88.0f, 100.0f, INFINITY,
                                       -INFINITY, NAN, 1e-40f});
  for (UnaryOp op : kUnary)
    check_close(run_unary(op, nograd::to_device(x, kGpu)), run_unary(op, x), rtol(DType::f32), atol(op, DType::f32),
                fmt::format("{} f32 edges", op_name(op)));
}

TEST_CASE("elementwise: comparisons, where, logical_not and isfinite") {
  for (DType dtype : kAllDTypes) {
    Pair a = make({1000003}, dtype, 70), b = make({1000003}, dtype, 71);
    // Make a tenth of the pairs equal so eq/le/ge see ties.
    const Tensor ties = nograd::lt(random_uniform({1000003}, 0, 1, DType::f32, Device::cpu(), 72), 0.1);
    b.cpu = nograd::where(ties, a.cpu, b.cpu);
    b.gpu = nograd::to_device(b.cpu, kGpu);
    for (CompareOp op : kCompare)
      check_close(run_compare(op, a.gpu, b.gpu), run_compare(op, a.cpu, b.cpu), 0.0, 0.0,
                  fmt::format("{} {}", op_name(op), dtype_name(dtype)));
    const Tensor cond_cpu = nograd::gt(a.cpu, b.cpu), cond_gpu = nograd::to_device(cond_cpu, kGpu);
    check_close(nograd::where(cond_gpu, a.gpu, b.gpu), nograd::where(cond_cpu, a.cpu, b.cpu), 0.0, 0.0,
                fmt::format("where {}", dtype_name(dtype)));
    check_close(nograd::logical_not(cond_gpu), nograd::logical_not(cond_cpu), 0.0);
    check_close(nograd::isfinite(a.gpu), nograd::isfinite(a.cpu), 0.0);
  }
  const Tensor specials = from_vector<float>({1.0f, INFINITY, -INFINITY, NAN, 0.0f});
  for (DType dtype : float_dtypes())
    check_close(nograd::isfinite(nograd::to_device(nograd::to_dtype(specials, dtype), kGpu)),
                from_vector<bool>({true, false, false, false, true}), 0.0);
  // where with broadcast condition and a scalar, as masked_fill uses it.
  const Pair x = make({7, 9}, DType::f32, 73);
  const Tensor mask_cpu = nograd::gt(make({9}, DType::f32, 74).cpu, 0.0);
  check_close(nograd::masked_fill(x.gpu, nograd::to_device(mask_cpu, kGpu), -1e9), nograd::masked_fill(x.cpu, mask_cpu, -1e9),
              0.0);
}

TEST_CASE("elementwise: gelu_backward, add_, mul_, fill_ and zero_") {
  for (DType dtype : float_dtypes()) {
    const Pair g = make({1000003}, dtype, 80), x = make({1000003}, dtype, 81);
    check_close(nograd::gelu_backward(g.gpu, x.gpu), nograd::gelu_backward(g.cpu, x.cpu), rtol(dtype), rtol(dtype),
                fmt::format("gelu_backward {}", dtype_name(dtype)));
  }
  for (DType dtype : numeric_dtypes()) {
    // s + alpha * o may be one fused multiply-add on either side (nvcc contracts by default, and
    // so may g++ on a CPU with FMA), so where the sum cancels only an absolute bound holds. The
    // values are below 10 in magnitude, and each step adds its own rounding.
    const double eps = rtol(dtype) * 10;
    Pair s = make({129, 37}, dtype, 82);
    const Pair o = make({37}, dtype, 83);
    nograd::add_(s.cpu, o.cpu, 0.5);
    nograd::add_(s.gpu, o.gpu, 0.5);
    check_close(s.gpu, s.cpu, rtol(dtype), eps, fmt::format("add_ {}", dtype_name(dtype)));
    nograd::mul_(s.cpu, -3.0);
    nograd::mul_(s.gpu, -3.0);
    check_close(s.gpu, s.cpu, rtol(dtype), 4 * eps, fmt::format("mul_ {}", dtype_name(dtype)));
    // In place through a transposed view.
    const Tensor t_cpu = nograd::transpose(s.cpu, 0, 1), t_gpu = nograd::transpose(s.gpu, 0, 1);
    nograd::add_(t_cpu, nograd::transpose(nograd::unsqueeze(o.cpu, 0), 0, 1), 1.0);
    nograd::add_(t_gpu, nograd::transpose(nograd::unsqueeze(o.gpu, 0), 0, 1), 1.0);
    check_close(s.gpu, s.cpu, rtol(dtype), 5 * eps, fmt::format("add_ through a view {}", dtype_name(dtype)));
  }
  for (DType dtype : kAllDTypes) {
    for (double v : {0.0, 1.0, -2.5, 65519.0, 1e10}) {
      if (v > 1e9 && !is_floating(dtype) && dtype != DType::boolean) continue;  // out of range: undefined
      Tensor cpu_t = empty({3, 1000}, dtype), gpu_t = empty({3, 1000}, dtype, kGpu);
      nograd::fill_(cpu_t, v);
      nograd::fill_(gpu_t, v);
      check_close(gpu_t, cpu_t, 0.0, 0.0, fmt::format("fill_ {} {}", dtype_name(dtype), v));
      nograd::zero_(nograd::narrow(gpu_t, 1, 5, 7));
      nograd::zero_(nograd::narrow(cpu_t, 1, 5, 7));
      check_close(gpu_t, cpu_t, 0.0, 0.0, fmt::format("zero_ of a slice {}", dtype_name(dtype)));
    }
  }
}

TEST_CASE("elementwise: zero-size tensors launch nothing and fail nothing") {
  const Tensor e = empty({0, 5}, DType::f32, kGpu);
  CHECK(nograd::add(e, e).shape() == Shape{0, 5});
  CHECK(nograd::exp(e).numel() == 0);
  nograd::fill_(e, 1.0);
  CHECK(nograd::to_device(e, Device::cpu()).numel() == 0);
}

TEST_CASE("elementwise: mixing devices is a clear error") {
  const Tensor g = zeros({3}, DType::f32, kGpu), c = zeros({3});
  CHECK(error_of([&] { nograd::add(g, c); }) == "add: devices differ: cuda:0 vs cpu");
  CHECK(error_of([&] { nograd::where(nograd::gt(c, 0.0), g, g); }) ==
        "where: devices differ: condition on cpu, values on cuda:0");
  CHECK(error_of([&] { nograd::add_(g, c); }) == "add_: devices differ: cuda:0 vs cpu");
}
