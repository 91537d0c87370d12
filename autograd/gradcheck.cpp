// gradcheck: analytic vector-Jacobian product from backward against central differences.
#include "autograd/gradcheck.h"

#include <fmt/format.h>

#include <cmath>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"
#include "tensor/nograd/reduce.h"

namespace accel {

namespace {

double projected(const Tensor& out, const Tensor& w) {
  return nograd::sum(nograd::mul(nograd::to_dtype(out, DType::f64), w)).item();
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
                          GradcheckOptions options) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].requires_grad() && inputs[i].dtype() != DType::f64)
      throw Error(fmt::format("gradcheck: input {} is {}, expected f64", i, dtype_name(inputs[i].dtype())));

  for (const Tensor& t : inputs)
    if (t.requires_grad()) t.set_grad(Tensor());
  Tensor out = f(inputs);
  Generator gen(options.seed);
  const Tensor w = randn(out.shape(), gen, DType::f64);
  if (!out.requires_grad()) return {false, "gradcheck: the output does not require grad; nothing was recorded"};
  backward(out, nograd::to_dtype(w, out.dtype()));

  NoGradGuard no_grad;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.requires_grad()) continue;
    if (!x.is_contiguous() || !x.device().is_cpu())
      throw Error(fmt::format("gradcheck: input {} must be a contiguous CPU tensor", i));
    const Tensor analytic = x.grad().defined() ? nograd::contiguous(x.grad()) : zeros(x.shape(), DType::f64);
    const std::vector<double> a = analytic.to_vector<double>();
    double* data = x.data<double>();
    for (int64_t k = 0; k < x.numel(); ++k) {
      const double saved = data[k];
      data[k] = saved + options.eps;
      const double plus = projected(f(inputs), w);
      data[k] = saved - options.eps;
      const double minus = projected(f(inputs), w);
      data[k] = saved;
      const double numeric = (plus - minus) / (2 * options.eps);
      if (!(std::abs(numeric - a[k]) <= options.atol + options.rtol * std::abs(numeric)))
        return {false, fmt::format("gradcheck: input {} element {}: analytic {:.10g} vs numeric {:.10g}", i, k, a[k],
                                   numeric)};
    }
  }
  return {};
}

}  // namespace accel
