// Raw elementwise entry points: check dtypes, devices and broadcast shapes once, then dispatch.
#include "tensor/nograd/elementwise.h"

#include <fmt/format.h>

#include "tensor/cpu/elementwise.h"
#include "tensor/creation.h"

#include "tensor/dispatch.h"

#if ACCEL_WITH_CUDA
#include "tensor/cuda/elementwise.h"
#endif

namespace accel {

const char* op_name(BinaryOp op) {
  static const char* names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum"};
  return names[static_cast<int>(op)];
}
const char* op_name(UnaryOp op) {
  static const char* names[] = {"neg", "exp", "log", "sqrt", "abs", "tanh", "sigmoid", "relu", "gelu"};
  return names[static_cast<int>(op)];
}
const char* op_name(CompareOp op) {
  static const char* names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  return names[static_cast<int>(op)];
}

namespace nograd {

namespace {

void check_defined(const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    if (!t->defined()) throw Error(fmt::format("{}: got an undefined tensor", op));
}

// Same dtype and device for both operands; returns the broadcast shape.
Shape check_pair(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(op, {&a, &b});
  if (a.dtype() != b.dtype())
    throw Error(fmt::format("{}: dtypes differ: {} {} vs {} {}; cast one with to_dtype", op, dtype_name(a.dtype()),
                            shape_str(a.shape()), dtype_name(b.dtype()), shape_str(b.shape())));
  if (a.device() != b.device())
    throw Error(fmt::format("{}: devices differ: {} vs {}", op, a.device().str(), b.device().str()));
  return broadcast_shapes(op, a.shape(), b.shape());
}

Tensor scalar_like(const Tensor& t, double value) { return scalar_tensor(value, t.dtype(), t.device()); }

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const Shape shape = check_pair(op_name(op), a, b);
  if (a.dtype() == DType::boolean || (needs_floating(op) && !is_floating(a.dtype())))
    throw Error(fmt::format("{}: unsupported dtype {}, expected {}", op_name(op), dtype_name(a.dtype()),
                            needs_floating(op) ? "a floating dtype" : "a numeric dtype (not bool)"));
  Tensor out = empty(shape, a.dtype(), a.device());
  ACCEL_DISPATCH(op_name(op), a.device(), binary, op, out, a, b);
  return out;
}

Tensor unary(UnaryOp op, const Tensor& t) {
  check_defined(op_name(op), {&t});
  if (t.dtype() == DType::boolean || (needs_floating(op) && !is_floating(t.dtype())))
    throw Error(fmt::format("{}: unsupported dtype {}, expected {}", op_name(op), dtype_name(t.dtype()),
                            needs_floating(op) ? "a floating dtype" : "a numeric dtype (not bool)"));
  Tensor out = empty(t.shape(), t.dtype(), t.device());
  ACCEL_DISPATCH(op_name(op), t.device(), unary, op, out, t);
  return out;
}

Tensor compare(CompareOp op, const Tensor& a, const Tensor& b) {
  const Shape shape = check_pair(op_name(op), a, b);
  Tensor out = empty(shape, DType::boolean, a.device());
  ACCEL_DISPATCH(op_name(op), a.device(), compare, op, out, a, b);
  return out;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::div, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary(BinaryOp::pow, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::minimum, a, b); }
Tensor add(const Tensor& a, double b) { return binary(BinaryOp::add, a, scalar_like(a, b)); }
Tensor sub(const Tensor& a, double b) { return binary(BinaryOp::sub, a, scalar_like(a, b)); }
Tensor mul(const Tensor& a, double b) { return binary(BinaryOp::mul, a, scalar_like(a, b)); }
Tensor div(const Tensor& a, double b) { return binary(BinaryOp::div, a, scalar_like(a, b)); }
Tensor pow(const Tensor& a, double exponent) { return binary(BinaryOp::pow, a, scalar_like(a, exponent)); }

Tensor neg(const Tensor& t) { return unary(UnaryOp::neg, t); }
Tensor exp(const Tensor& t) { return unary(UnaryOp::exp, t); }
Tensor log(const Tensor& t) { return unary(UnaryOp::log, t); }
Tensor sqrt(const Tensor& t) { return unary(UnaryOp::sqrt, t); }
Tensor abs(const Tensor& t) { return unary(UnaryOp::abs, t); }
Tensor tanh(const Tensor& t) { return unary(UnaryOp::tanh, t); }
Tensor sigmoid(const Tensor& t) { return unary(UnaryOp::sigmoid, t); }
Tensor relu(const Tensor& t) { return unary(UnaryOp::relu, t); }
Tensor gelu(const Tensor& t) { return unary(UnaryOp::gelu, t); }

namespace {

// The checks of an activation's backward from its input: grad and x alike in shape, dtype and device.
void check_activation_backward(const char* op, const Tensor& grad, const Tensor& x) {
  check_pair(op, grad, x);
  if (grad.shape() != x.shape())
    throw Error(fmt::format("{}: grad {} and input {} differ in shape", op, shape_str(grad.shape()),
                            shape_str(x.shape())));
  if (!is_floating(x.dtype())) throw_unsupported_dtype(op, x.dtype(), "a floating dtype");
}

}  // namespace

Tensor tanh_backward(const Tensor& grad, const Tensor& x) {
  check_activation_backward("tanh_backward", grad, x);
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  ACCEL_DISPATCH("tanh_backward", x.device(), tanh_backward, out, grad, x);
  return out;
}

Tensor gelu_backward(const Tensor& grad, const Tensor& x) {
  check_activation_backward("gelu_backward", grad, x);
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  ACCEL_DISPATCH("gelu_backward", x.device(), gelu_backward, out, grad, x);
  return out;
}

Tensor relu_backward(const Tensor& grad, const Tensor& y) {
  check_pair("relu_backward", grad, y);
  if (grad.shape() != y.shape())
    throw Error(fmt::format("relu_backward: grad {} and output {} differ in shape", shape_str(grad.shape()),
                            shape_str(y.shape())));
  if (!is_floating(y.dtype())) throw_unsupported_dtype("relu_backward", y.dtype(), "a floating dtype");
  if (!y.device().is_cpu()) return where(gt(y, 0.0), grad, scalar_like(grad, 0.0));  // no fused kernel there yet
  Tensor out = empty(y.shape(), y.dtype(), y.device());
  cpu::relu_backward(out, grad, y);
  return out;
}

Tensor eq(const Tensor& a, const Tensor& b) { return compare(CompareOp::eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(CompareOp::ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(CompareOp::lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(CompareOp::le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(CompareOp::gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(CompareOp::ge, a, b); }
Tensor eq(const Tensor& a, double b) { return compare(CompareOp::eq, a, scalar_like(a, b)); }
Tensor ne(const Tensor& a, double b) { return compare(CompareOp::ne, a, scalar_like(a, b)); }
Tensor lt(const Tensor& a, double b) { return compare(CompareOp::lt, a, scalar_like(a, b)); }
Tensor le(const Tensor& a, double b) { return compare(CompareOp::le, a, scalar_like(a, b)); }
Tensor gt(const Tensor& a, double b) { return compare(CompareOp::gt, a, scalar_like(a, b)); }
Tensor ge(const Tensor& a, double b) { return compare(CompareOp::ge, a, scalar_like(a, b)); }

Tensor logical_not(const Tensor& t) {
  check_defined("logical_not", {&t});
  if (t.dtype() != DType::boolean) throw_unsupported_dtype("logical_not", t.dtype(), "bool");
  Tensor out = empty(t.shape(), DType::boolean, t.device());
  ACCEL_DISPATCH("logical_not", t.device(), logical_not, out, t);
  return out;
}

Tensor isfinite(const Tensor& t) {
  check_defined("isfinite", {&t});
  Tensor out = empty(t.shape(), DType::boolean, t.device());
  ACCEL_DISPATCH("isfinite", t.device(), isfinite, out, t);
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined("where", {&cond, &a, &b});
  if (cond.dtype() != DType::boolean)
    throw Error(fmt::format("where: condition must be bool, got {} {}", dtype_name(cond.dtype()),
                            shape_str(cond.shape())));
  if (cond.device() != a.device())
    throw Error(fmt::format("where: devices differ: condition on {}, values on {}", cond.device().str(),
                            a.device().str()));
  const Shape shape = broadcast_shapes("where", cond.shape(), check_pair("where", a, b));
  Tensor out = empty(shape, a.dtype(), a.device());
  ACCEL_DISPATCH("where", a.device(), where, out, cond, a, b);
  return out;
}

Tensor masked_fill(const Tensor& t, const Tensor& mask, double value) {
  check_defined("masked_fill", {&t, &mask});
  if (mask.dtype() != DType::boolean)
    throw Error(fmt::format("masked_fill: mask must be bool, got {} {}", dtype_name(mask.dtype()),
                            shape_str(mask.shape())));
  if (broadcast_shapes("masked_fill", t.shape(), mask.shape()) != t.shape())
    throw Error(fmt::format("masked_fill: mask {} does not broadcast to the input {}", shape_str(mask.shape()),
                            shape_str(t.shape())));
  return where(mask, scalar_like(t, value), t);
}

void add_(const Tensor& self, const Tensor& other, double alpha) {
  if (check_pair("add_", self, other) != self.shape())
    throw Error(fmt::format("add_: {} does not broadcast to the destination {}", shape_str(other.shape()),
                            shape_str(self.shape())));
  if (self.dtype() == DType::boolean) throw_unsupported_dtype("add_", self.dtype(), "a numeric dtype (not bool)");
  ACCEL_DISPATCH("add_", self.device(), add_scaled, self, other, alpha);
}

void mul_(const Tensor& self, double value) {
  check_defined("mul_", {&self});
  if (self.dtype() == DType::boolean) throw_unsupported_dtype("mul_", self.dtype(), "a numeric dtype (not bool)");
  ACCEL_DISPATCH("mul_", self.device(), scale, self, value);
}

void fill_(const Tensor& self, double value) {
  check_defined("fill_", {&self});
  ACCEL_DISPATCH("fill_", self.device(), fill, self, value);
}

void zero_(const Tensor& self) { fill_(self, 0.0); }

}  // namespace nograd
}  // namespace accel
