// CUDA elementwise ops: lay the operands out for the kernels and launch on the compute stream.
#include "tensor/cuda/elementwise.h"

#include "kernels/elementwise.h"
#include "tensor/cpu/convert.h"
#include "tensor/cuda/device.h"
#include "tensor/cuda/launch.h"
#include "tensor/cuda/stream.h"

namespace accel::cuda {

namespace {

// Runs launch(args, stream) over out and inputs with out's device current.
template <int N, class Launch>
void run(const Tensor& out, const std::array<const Tensor*, N - 1>& inputs, Launch&& launch) {
  const DeviceGuard guard(out.device());
  const cudaStream_t stream = compute_stream(out.device());
  for_each_launch<N>(out, inputs, [&](const kernels::StridedArgs<N>& args) { launch(args, stream); });
}

}  // namespace

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  run<3>(out, {&a, &b}, [&](const auto& args, cudaStream_t s) { kernels::launch_binary(op, out.dtype(), args, s); });
}

void unary(UnaryOp op, const Tensor& out, const Tensor& in) {
  run<2>(out, {&in}, [&](const auto& args, cudaStream_t s) { kernels::launch_unary(op, out.dtype(), args, s); });
}

void compare(CompareOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  run<3>(out, {&a, &b}, [&](const auto& args, cudaStream_t s) { kernels::launch_compare(op, a.dtype(), args, s); });
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  run<4>(out, {&cond, &a, &b}, [&](const auto& args, cudaStream_t s) { kernels::launch_where(out.dtype(), args, s); });
}

void logical_not(const Tensor& out, const Tensor& in) {
  run<2>(out, {&in}, [&](const auto& args, cudaStream_t s) { kernels::launch_logical_not(args, s); });
}

void isfinite(const Tensor& out, const Tensor& in) {
  run<2>(out, {&in}, [&](const auto& args, cudaStream_t s) { kernels::launch_isfinite(in.dtype(), args, s); });
}

void tanh_backward(const Tensor& out, const Tensor& grad, const Tensor& x) {
  run<3>(out, {&grad, &x},
         [&](const auto& args, cudaStream_t s) { kernels::launch_tanh_backward(out.dtype(), args, s); });
}

void gelu_backward(const Tensor& out, const Tensor& grad, const Tensor& x) {
  run<3>(out, {&grad, &x},
         [&](const auto& args, cudaStream_t s) { kernels::launch_gelu_backward(out.dtype(), args, s); });
}

void add_scaled(const Tensor& self, const Tensor& other, double alpha) {
  run<3>(self, {&self, &other},
         [&](const auto& args, cudaStream_t s) { kernels::launch_add_scaled(self.dtype(), args, alpha, s); });
}

void scale(const Tensor& self, double value) {
  run<2>(self, {&self}, [&](const auto& args, cudaStream_t s) { kernels::launch_scale(self.dtype(), args, value, s); });
}

void fill(const Tensor& self, double value) {
  // Converted on the host with the CPU's rules, so a fill writes the same bits on every device.
  dispatch_all(self.dtype(), "fill_", [&]<class T>() {
    const T v = cpu::convert<T>(value);
    run<1>(self, {}, [&](const auto& args, cudaStream_t s) { kernels::launch_fill(self.dtype(), args, &v, s); });
  });
}

}  // namespace accel::cuda
