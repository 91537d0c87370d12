// CPU elementwise ops: each op enum is turned into a template so the per-element math inlines.
#include "tensor/cpu/elementwise.h"

#include "kernels/op_dispatch.h"
#include "tensor/cpu/map.h"
#include "tensor/cpu/vec_math.h"
#include "tensor/op_time.h"

namespace accel::cpu {

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  const op_time::Scope timed(op_time::Kind::elementwise);
  dispatch_numeric(out.dtype(), op_name(op), [&]<class T>() {
    with_op(op, [&]<BinaryOp Op>() {
      if constexpr (needs_floating(Op) && !std::is_floating_point_v<compute_t<T>>)
        throw_unsupported_dtype(op_name(Op), out.dtype(), "a floating dtype");
      else
        map<T, T, T>(out, [](T x, T y) { return store<T>(apply_binary<Op>(load(x), load(y))); }, a, b);
    });
  });
}

void unary(UnaryOp op, const Tensor& out, const Tensor& in) {
  const op_time::Scope timed(op == UnaryOp::gelu ? op_time::Kind::gelu : op_time::Kind::elementwise);
  dispatch_numeric(out.dtype(), op_name(op), [&]<class T>() {
    with_op(op, [&]<UnaryOp Op>() {
      if constexpr (needs_floating(Op) && !std::is_floating_point_v<compute_t<T>>) {
        throw_unsupported_dtype(op_name(Op), out.dtype(), "a floating dtype");
      } else {
        if constexpr (has_vector_form(Op) && std::is_floating_point_v<T>) {
          if (out.is_contiguous() && in.is_contiguous() && in.shape() == out.shape()) {
            const T* src = static_cast<const T*>(in.data_ptr());
            T* dst = static_cast<T*>(out.data_ptr());
            parallel_ranges(out.numel(), [&](int64_t b, int64_t e) { unary_vector<Op>(src + b, dst + b, e - b); });
            return;
          }
        }
        map<T, T>(out, [](T x) { return store<T>(apply_unary<Op>(load(x))); }, in);
      }
    });
  });
}

void compare(CompareOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch_all(a.dtype(), op_name(op), [&]<class T>() {
    with_op(op, [&]<CompareOp Op>() {
      map<bool, T, T>(out, [](T x, T y) { return apply_compare<Op>(load(x), load(y)); }, a, b);
    });
  });
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  dispatch_all(out.dtype(), "where", [&]<class T>() {
    map<T, bool, T, T>(out, [](bool c, T x, T y) { return c ? x : y; }, cond, a, b);
  });
}

void logical_not(const Tensor& out, const Tensor& in) {
  map<bool, bool>(out, [](bool x) { return !x; }, in);
}

void isfinite(const Tensor& out, const Tensor& in) {
  dispatch_all(in.dtype(), "isfinite", [&]<class T>() {
    map<bool, T>(out, [](T x) {
      if constexpr (std::is_floating_point_v<compute_t<T>>) return std::isfinite(load(x));
      else return true;
    }, in);
  });
}

namespace {

// out = grad * derivative(x): contiguous f32/f64 runs go to vector(grad, x, out, n) over the
// threads, the rest (strided, halves) through map with the per-element derivative.
template <class Vector, class Derivative>
void activation_backward(const char* op, const Tensor& out, const Tensor& grad, const Tensor& x, Vector&& vector,
                         Derivative&& derivative) {
  dispatch_floating(out.dtype(), op, [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) {
      if (out.is_contiguous() && grad.is_contiguous() && x.is_contiguous()) {
        const T* g = static_cast<const T*>(grad.data_ptr());
        const T* v = static_cast<const T*>(x.data_ptr());
        T* o = static_cast<T*>(out.data_ptr());
        parallel_ranges(out.numel(), [&](int64_t b, int64_t e) { vector(g + b, v + b, o + b, e - b); });
        return;
      }
    }
    map<T, T, T>(out, [&](T g, T v) { return store<T>(load(g) * derivative(load(v))); }, grad, x);
  });
}

}  // namespace

void tanh_backward(const Tensor& out, const Tensor& grad, const Tensor& x) {
  activation_backward(
      "tanh_backward", out, grad, x, [](const auto* g, const auto* v, auto* o, int64_t n) { tanh_backward_vector(g, v, o, n); },
      [](auto v) { return tanh_grad(v); });
}

void gelu_backward(const Tensor& out, const Tensor& grad, const Tensor& x) {
  const op_time::Scope timed(op_time::Kind::gelu);
  activation_backward(
      "gelu_backward", out, grad, x, [](const auto* g, const auto* v, auto* o, int64_t n) { gelu_backward_vector(g, v, o, n); },
      [](auto v) { return gelu_tanh_grad(v); });
}

void relu_backward(const Tensor& out, const Tensor& grad, const Tensor& y) {
  dispatch_floating(out.dtype(), "relu_backward", [&]<class T>() {
    map<T, T, T>(out, [](T g, T v) { return store<T>(relu_grad(load(g), load(v))); }, grad, y);
  });
}

void add_scaled(const Tensor& self, const Tensor& other, double alpha) {
  const op_time::Scope timed(op_time::Kind::elementwise);
  dispatch_numeric(self.dtype(), "add_", [&]<class T>() {
    using C = compute_t<T>;
    const C a = static_cast<C>(alpha);
    map<T, T, T>(self, [a](T s, T o) { return store<T>(load(s) + a * load(o)); }, self, other);
  });
}

void scale(const Tensor& self, double value) {
  const op_time::Scope timed(op_time::Kind::elementwise);
  dispatch_numeric(self.dtype(), "mul_", [&]<class T>() {
    using C = compute_t<T>;
    const C v = static_cast<C>(value);
    map<T, T>(self, [v](T s) { return store<T>(load(s) * v); }, self);
  });
}

void fill(const Tensor& self, double value) {
  const op_time::Scope timed(op_time::Kind::copy_fill);
  dispatch_all(self.dtype(), "fill_", [&]<class T>() {
    const T v = convert<T>(value);
    map<T>(self, [v]() { return v; });
  });
}

}  // namespace accel::cpu
