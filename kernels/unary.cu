// Unary math kernels (neg, exp, log, sqrt, abs, tanh, sigmoid, relu, gelu); the math is
// apply_unary from kernels/elementwise_math.h, computed in compute_t<T>.
#include <type_traits>

#include "kernels/convert.cuh"
#include "kernels/elementwise.h"
#include "kernels/map.cuh"
#include "kernels/op_dispatch.h"

namespace accel::kernels {

namespace unary_detail {
template <UnaryOp Op, class T>
struct UnaryFn {
  __device__ T operator()(T x) const { return store<T>(apply_unary<Op>(load(x))); }
};
}  // namespace unary_detail

void launch_unary(UnaryOp op, DType dtype, const StridedArgs<2>& args, cudaStream_t stream) {
  dispatch_numeric(dtype, op_name(op), [&]<class T>() {
    with_op(op, [&]<UnaryOp Op>() {
      if constexpr (needs_floating(Op) && !std::is_floating_point_v<compute_t<T>>)
        throw_unsupported_dtype(op_name(Op), dtype, "a floating dtype");
      else
        launch_map<T, T>(op_name(Op), unary_detail::UnaryFn<Op, T>{}, args, stream);
    });
  });
}

}  // namespace accel::kernels
