// Differentiable elementwise ops. Each grad is summed back to its input's shape, undoing the
// broadcast of the forward.
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/node.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/reduce.h"

namespace accel {

using autograd::record;
using Grads = std::vector<Tensor>;

namespace {

Tensor zero_like_scalar(const Tensor& t) { return scalar_tensor(0.0, t.dtype(), t.device()); }
// A 0-d tensor of value in like's dtype and device: the scalar operand of a binary op.
Tensor scalar_like(double value, const Tensor& like) { return scalar_tensor(value, like.dtype(), like.device()); }
Tensor unbroadcast(const Tensor& grad, const Tensor& input) { return nograd::sum_to_shape(grad, input.shape()); }

}  // namespace

Tensor add(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in, b = b_in;
  autocast::promote(a, b);
  Tensor out = nograd::add(a, b);
  record("AddBackward", {a, b}, {out},
         [a = detach(a), b = detach(b), need_a = a.requires_grad(), need_b = b.requires_grad()](const Grads& g) -> Grads {
           return {need_a ? unbroadcast(g[0], a) : Tensor(), need_b ? unbroadcast(g[0], b) : Tensor()};
         });
  return out;
}

Tensor sub(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in, b = b_in;
  autocast::promote(a, b);
  Tensor out = nograd::sub(a, b);
  record("SubBackward", {a, b}, {out},
         [a = detach(a), b = detach(b), need_a = a.requires_grad(), need_b = b.requires_grad()](const Grads& g) -> Grads {
           return {need_a ? unbroadcast(g[0], a) : Tensor(), need_b ? unbroadcast(nograd::neg(g[0]), b) : Tensor()};
         });
  return out;
}

Tensor mul(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in, b = b_in;
  autocast::promote(a, b);
  Tensor out = nograd::mul(a, b);
  record("MulBackward", {a, b}, {out},
         [a = detach(a), b = detach(b), need_a = a.requires_grad(), need_b = b.requires_grad()](const Grads& g) -> Grads {
           return {need_a ? unbroadcast(nograd::mul(g[0], b), a) : Tensor(),
                   need_b ? unbroadcast(nograd::mul(g[0], a), b) : Tensor()};
         });
  return out;
}

Tensor div(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in, b = b_in;
  autocast::promote(a, b);
  Tensor out = nograd::div(a, b);
  record("DivBackward", {a, b}, {out},
         [a = detach(a), b = detach(b), need_b = b.requires_grad()](const Grads& g) -> Grads {
           Tensor ga = nograd::div(g[0], b);
           Tensor gb = need_b ? unbroadcast(nograd::neg(nograd::div(nograd::mul(ga, a), b)), b) : Tensor();
           return {unbroadcast(ga, a), gb};
         });
  return out;
}

// pow's grads follow PyTorch's limits (pow_backward_self, pow_backward_exponent) where the plain
// formulas meet 0 * inf or 0 * log(0): d/da is 0 wherever b = 0, since a^0 = 1 for every a, and d/db
// is 0 where a = 0 and b >= 0, since 0^b = 0 for every b > 0. Elsewhere they keep their inf and NaN:
// d/da at a = 0 when b < 1 and b != 0, d/db of a negative base (the log of a negative).
Tensor pow(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in, b = b_in;
  autocast::promote(a, b);
  Tensor out = nograd::pow(a, b);
  record("PowBackward", {a, b}, {out},
         [a = detach(a), b = detach(b), out = detach(out), need_b = b.requires_grad()](const Grads& g) -> Grads {
           const Tensor zero = zero_like_scalar(g[0]);
           const Tensor da = nograd::mul(nograd::mul(g[0], b), nograd::pow(a, nograd::sub(b, 1.0)));
           Tensor ga = nograd::where(nograd::eq(b, 0.0), zero, da);
           Tensor gb;
           if (need_b) {
             const Tensor db = nograd::mul(nograd::mul(g[0], out), nograd::log(a));
             gb = unbroadcast(nograd::where(nograd::ge(b, 0.0), nograd::where(nograd::eq(a, 0.0), zero, db), db), b);
           }
           return {unbroadcast(ga, a), gb};
         });
  return out;
}

Tensor pow(const Tensor& a, double exponent) {
  Tensor out = nograd::pow(a, exponent);
  record("PowScalarBackward", {a}, {out}, [a = detach(a), exponent](const Grads& g) -> Grads {
    if (exponent == 0.0) return {zeros_like(g[0])};  // a^0 = 1: even at a = 0 the grad is 0
    return {nograd::mul(nograd::mul(g[0], exponent), nograd::pow(a, exponent - 1.0))};
  });
  return out;
}

// Ties share the grad equally, so the result is the average of the two one-sided grads.
static Tensor min_max(const char* name, const Tensor& a, const Tensor& b, Tensor out, bool is_max) {
  record(name, {a, b}, {out}, [a = detach(a), b = detach(b), is_max](const Grads& g) -> Grads {
    const Tensor a_wins = is_max ? nograd::gt(a, b) : nograd::lt(a, b);
    const Tensor tie = nograd::eq(a, b);
    const Tensor half = nograd::mul(g[0], 0.5);
    const Tensor zero = zero_like_scalar(g[0]);
    Tensor ga = nograd::where(a_wins, g[0], nograd::where(tie, half, zero));
    Tensor gb = nograd::where(a_wins, zero, nograd::where(tie, half, g[0]));
    return {unbroadcast(ga, a), unbroadcast(gb, b)};
  });
  return out;
}

Tensor maximum(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in, b = b_in;
  autocast::promote(a, b);
  return min_max("MaximumBackward", a, b, nograd::maximum(a, b), true);
}
Tensor minimum(const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in, b = b_in;
  autocast::promote(a, b);
  return min_max("MinimumBackward", a, b, nograd::minimum(a, b), false);
}

Tensor neg(const Tensor& t) {
  Tensor out = nograd::neg(t);
  record("NegBackward", {t}, {out}, [](const Grads& g) -> Grads { return {nograd::neg(g[0])}; });
  return out;
}

Tensor exp(const Tensor& t) {
  Tensor out = nograd::exp(t);
  record("ExpBackward", {t}, {out}, [out = detach(out)](const Grads& g) -> Grads { return {nograd::mul(g[0], out)}; });
  return out;
}

Tensor log(const Tensor& t) {
  Tensor out = nograd::log(t);
  record("LogBackward", {t}, {out}, [t = detach(t)](const Grads& g) -> Grads { return {nograd::div(g[0], t)}; });
  return out;
}

Tensor sqrt(const Tensor& t) {
  Tensor out = nograd::sqrt(t);
  record("SqrtBackward", {t}, {out},
         [out = detach(out)](const Grads& g) -> Grads { return {nograd::div(nograd::mul(g[0], 0.5), out)}; });
  return out;
}

Tensor abs(const Tensor& t) {
  Tensor out = nograd::abs(t);
  record("AbsBackward", {t}, {out}, [t = detach(t)](const Grads& g) -> Grads {
    const Tensor zero = zero_like_scalar(g[0]);
    return {nograd::where(nograd::gt(t, 0.0), g[0], nograd::where(nograd::lt(t, 0.0), nograd::neg(g[0]), zero))};
  });
  return out;
}

Tensor tanh(const Tensor& t) {
  Tensor out = nograd::tanh(t);
  // From the input: 1 - out^2 would cancel where tanh saturates.
  record("TanhBackward", {t}, {out}, [t = detach(t)](const Grads& g) -> Grads { return {nograd::tanh_backward(g[0], t)}; });
  return out;
}

Tensor sigmoid(const Tensor& t) {
  Tensor out = nograd::sigmoid(t);
  record("SigmoidBackward", {t}, {out}, [out = detach(out)](const Grads& g) -> Grads {
    return {nograd::mul(nograd::mul(g[0], out), nograd::sub(ones_like(out), out))};
  });
  return out;
}

Tensor relu(const Tensor& t) {
  Tensor out = nograd::relu(t);
  record("ReluBackward", {t}, {out},
         [out = detach(out)](const Grads& g) -> Grads { return {nograd::relu_backward(g[0], out)}; });
  return out;
}

Tensor gelu(const Tensor& t) {
  Tensor out = nograd::gelu(t);
  record("GeluBackward", {t}, {out}, [t = detach(t)](const Grads& g) -> Grads { return {nograd::gelu_backward(g[0], t)}; });
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a_in, const Tensor& b_in) {
  Tensor a = a_in, b = b_in;
  autocast::promote(a, b);
  Tensor out = nograd::where(cond, a, b);
  record("WhereBackward", {a, b}, {out}, [cond = detach(cond), a = detach(a), b = detach(b)](const Grads& g) -> Grads {
    const Tensor zero = zero_like_scalar(g[0]);
    return {unbroadcast(nograd::where(cond, g[0], zero), a), unbroadcast(nograd::where(cond, zero, g[0]), b)};
  });
  return out;
}

Tensor masked_fill(const Tensor& t, const Tensor& mask, double value) {
  Tensor out = nograd::masked_fill(t, mask, value);
  record("MaskedFillBackward", {t}, {out}, [mask = detach(mask)](const Grads& g) -> Grads {
    return {nograd::where(mask, zero_like_scalar(g[0]), g[0])};
  });
  return out;
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& t) { return neg(t); }
Tensor add(const Tensor& a, double b) { return add(a, scalar_like(b, a)); }
Tensor sub(const Tensor& a, double b) { return sub(a, scalar_like(b, a)); }
Tensor mul(const Tensor& a, double b) { return mul(a, scalar_like(b, a)); }
Tensor div(const Tensor& a, double b) { return div(a, scalar_like(b, a)); }
Tensor maximum(const Tensor& a, double b) { return maximum(a, scalar_like(b, a)); }
Tensor minimum(const Tensor& a, double b) { return minimum(a, scalar_like(b, a)); }

Tensor operator+(const Tensor& a, double b) { return add(a, b); }
Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
Tensor operator/(const Tensor& a, double b) { return div(a, b); }
Tensor operator+(double a, const Tensor& b) { return add(scalar_like(a, b), b); }
Tensor operator-(double a, const Tensor& b) { return sub(scalar_like(a, b), b); }
Tensor operator*(double a, const Tensor& b) { return mul(scalar_like(a, b), b); }
Tensor operator/(double a, const Tensor& b) { return div(scalar_like(a, b), b); }

}  // namespace accel
