// pow's gradients where the plain formulas give 0 * inf or 0 * log(0): each corner against PyTorch's
// value, with tensor and scalar exponents, in f64 and f32.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "accel.h"

using namespace accel;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct PowCase {
  double a, b, out, da, db;
};

// torch.pow(a, b) and torch.autograd.grad of it w.r.t. (a, b), with a and b 0-d f64 tensors that
// require grad (PyTorch 2.x, /root/torchvenv). torch.pow(a, float(b)) gives the same da. The f32 runs
// give these values rounded to f32.
const std::vector<PowCase> kTorch = {
    {0.0, 0.0, 1.0, 0.0, 0.0},
    {0.0, 1.0, 0.0, 1.0, 0.0},
    {0.0, 2.0, 0.0, 0.0, 0.0},
    {0.0, 0.5, 0.0, kInf, 0.0},
    {0.0, -1.0, kInf, -kInf, -kInf},
    {0.0, 3.0, 0.0, 0.0, 0.0},
    {0.0, -2.0, kInf, -kInf, -kInf},
    {-0.0, 0.0, 1.0, 0.0, 0.0},
    {-0.0, 1.0, -0.0, 1.0, 0.0},
    {-0.0, 2.0, 0.0, -0.0, 0.0},
    {-0.0, -1.0, -kInf, -kInf, kInf},
    {-2.0, 0.0, 1.0, 0.0, kNaN},
    {-2.0, 1.0, -2.0, 1.0, kNaN},
    {-2.0, 2.0, 4.0, -4.0, kNaN},
    {-2.0, 0.5, kNaN, kNaN, kNaN},
    {-2.0, -1.0, -0.5, -0.25, kNaN},
    {-2.0, 3.0, -8.0, 12.0, kNaN},
    {-2.0, -2.0, 0.25, 0.25, kNaN},
    {-1.5, 0.0, 1.0, 0.0, kNaN},
    {-1.5, 1.0, -1.5, 1.0, kNaN},
    {-1.5, 2.0, 2.25, -3.0, kNaN},
    {-1.5, -1.0, -0.6666666666666666, -0.4444444444444444, kNaN},
    {-1.5, 3.0, -3.375, 6.75, kNaN},
    {-1.5, -2.0, 0.4444444444444444, 0.5925925925925926, kNaN},
    {3.0, 0.0, 1.0, 0.0, 1.0986122886681098},
    {3.0, 1.0, 3.0, 1.0, 3.295836866004329},
    {3.0, 2.0, 9.0, 6.0, 9.887510598012987},
    {3.0, 0.5, 1.7320508075688772, 0.28867513459481287, 1.902852301792692},
    {3.0, -1.0, 0.3333333333333333, -0.1111111111111111, 0.3662040962227032},
    {3.0, -2.0, 0.1111111111111111, -0.07407407407407407, 0.12206803207423442},
};

// Equal as PyTorch's values are meant: NaN for NaN, the same infinity, 0 for 0 (either sign), else
// within rel of the reference.
bool matches(double got, double want, double rel) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::abs(got - want) <= rel * std::max(1.0, std::abs(want));
}

std::vector<double> column(double PowCase::*field) {
  std::vector<double> out;
  for (const PowCase& c : kTorch) out.push_back(c.*field);
  return out;
}

std::vector<double> as_f64(const Tensor& t) { return to(t, DType::f64).to_vector<double>(); }

void check_column(const char* what, DType dtype, const std::vector<double>& got, double PowCase::*field) {
  const double rel = dtype == DType::f64 ? 1e-15 : 1e-6;
  for (size_t i = 0; i < kTorch.size(); ++i) {
    const double want = kTorch[i].*field;
    INFO(what, " ", dtype_name(dtype), ": pow(", kTorch[i].a, ", ", kTorch[i].b, ") got ", got[i], ", PyTorch ", want);
    CHECK(matches(got[i], want, rel));
  }
}

}  // namespace

TEST_CASE("pow(a, b) with tensor exponents: values and both grads match PyTorch at every corner") {
  for (DType dtype : {DType::f64, DType::f32}) {
    Tensor a = to(from_vector(column(&PowCase::a)), dtype).requires_grad_();
    Tensor b = to(from_vector(column(&PowCase::b)), dtype).requires_grad_();
    const Tensor out = pow(a, b);
    backward(out, ones_like(out));
    check_column("out", dtype, as_f64(out), &PowCase::out);
    check_column("d/da", dtype, as_f64(a.grad()), &PowCase::da);
    check_column("d/db", dtype, as_f64(b.grad()), &PowCase::db);
  }
}

TEST_CASE("pow(a, exponent) with scalar exponents: d/da matches PyTorch, and is 0 everywhere for exponent 0") {
  for (DType dtype : {DType::f64, DType::f32}) {
    for (const PowCase& c : kTorch) {
      Tensor a = to(from_vector<double>({c.a}), dtype).requires_grad_();
      backward(sum(pow(a, c.b)));
      const double got = as_f64(a.grad())[0];
      INFO(dtype_name(dtype), ": pow(", c.a, ", ", c.b, ") d/da got ", got, ", PyTorch ", c.da);
      CHECK(matches(got, c.da, dtype == DType::f64 ? 1e-15 : 1e-6));
    }
  }
  // x^0 is 1 for every x, 0 and -0 included, so its grad is 0 and never NaN.
  Tensor x = from_vector<float>({0.0f, -0.0f, 2.0f, -3.0f}).requires_grad_();
  backward(sum(pow(x, 0.0)));
  CHECK(x.grad().to_vector<float>() == std::vector<float>{0, 0, 0, 0});
}

TEST_CASE("pow grads at zero broadcast: one exponent 0 over a row of bases, one base 0 under a row of exponents") {
  Tensor a = from_vector<double>({0.0, 1.0, -2.0}).requires_grad_();
  Tensor b = from_vector<double>({0.0}).requires_grad_();
  backward(sum(pow(a, b)));
  CHECK(a.grad().to_vector<double>() == std::vector<double>{0, 0, 0});
  CHECK(std::isnan(b.grad().to_vector<double>()[0]));  // log(-2) is NaN, as PyTorch gives

  Tensor zero = from_vector<double>({0.0}).requires_grad_();
  Tensor e = from_vector<double>({0.0, 1.0, 2.0}).requires_grad_();
  backward(sum(pow(zero, e)));
  CHECK(zero.grad().to_vector<double>() == std::vector<double>{1.0});  // 0 + 1 + 0
  CHECK(e.grad().to_vector<double>() == std::vector<double>{0, 0, 0});
}
