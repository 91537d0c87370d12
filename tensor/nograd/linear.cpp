// Raw linear entry point: checks the operands once, folds x's leading dims into GEMM rows and
// dispatches: the CPU's fused kernel, or on CUDA one cuBLASLt GEMM with the bias in its epilogue.
#include "tensor/nograd/linear.h"

#include <fmt/format.h>

#include "accel_config.h"
#include "tensor/cpu/matmul.h"
#include "tensor/creation.h"
#include "tensor/dispatch.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/matmul.h"
#include "tensor/nograd/views.h"

#if ACCEL_WITH_CUDA
#include "tensor/cuda/matmul.h"
#endif

namespace accel::nograd {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (!x.defined() || !weight.defined()) throw Error("linear: got an undefined x or weight");
  if (weight.dim() != 2)
    throw Error(fmt::format("linear: weight must be [out, in], got {}", shape_str(weight.shape())));
  if (x.dim() < 1 || x.size(-1) != weight.size(1))
    throw Error(fmt::format("linear: input {} does not end in in_features {} of weight {}", shape_str(x.shape()),
                            weight.size(1), shape_str(weight.shape())));
  if (bias.defined() && bias.shape() != Shape{weight.size(0)})
    throw Error(fmt::format("linear: bias {} does not match out_features {}", shape_str(bias.shape()),
                            weight.size(0)));
  for (const Tensor* t : {&weight, &bias}) {
    if (!t->defined()) continue;
    if (t->dtype() != x.dtype())
      throw Error(fmt::format("linear: dtypes differ: x is {}, {} is {}", dtype_name(x.dtype()),
                              t == &weight ? "weight" : "bias", dtype_name(t->dtype())));
    if (t->device() != x.device())
      throw Error(fmt::format("linear: devices differ: x is on {}, {} on {}", x.device().str(),
                              t == &weight ? "weight" : "bias", t->device().str()));
  }
  if (!is_floating(x.dtype())) throw_unsupported_dtype("linear", x.dtype(), "a floating dtype (f64, f32, f16, bf16)");

  const int64_t in = weight.size(1), out_features = weight.size(0);
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  Tensor out = empty(out_shape, x.dtype(), x.device());
  // [rows, in]: a view when x's leading dims merge (any contiguous x), else a copy.
  const Tensor x2 = x.dim() == 2 ? x : reshape(x, {-1, in});
  const Tensor out2 = view(out, {x2.size(0), out_features});
  if (x.device().is_cpu()) {
    cpu::linear(out2, x2, weight, bias);
    return out;
  }
#if ACCEL_WITH_CUDA
  // cuBLASLt reads the weight transposed in place and adds the bias in its epilogue.
  if (bias.defined()) cuda::matmul_bias(out2, x2, transpose(weight, 0, 1), contiguous(bias));
  else cuda::matmul(out2, x2, transpose(weight, 0, 1));
  return out;
#else
  throw_no_cuda("linear", x.device());
#endif
}

}  // namespace accel::nograd
