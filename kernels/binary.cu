// Binary arithmetic kernels (add, sub, mul, div, pow, maximum, minimum) over the numeric dtypes;
// the math is apply_binary from kernels/elementwise_math.h, computed in compute_t<T>.
#include <type_traits>

#include "kernels/convert.cuh"
#include "kernels/elementwise.h"
#include "kernels/map.cuh"
#include "kernels/op_dispatch.h"

namespace accel::kernels {

namespace binary_detail {
template <BinaryOp Op, class T>
struct BinaryFn {
  __device__ T operator()(T a, T b) const { return store<T>(apply_binary<Op>(load(a), load(b))); }
};
}  // namespace binary_detail

void launch_binary(BinaryOp op, DType dtype, const StridedArgs<3>& args, cudaStream_t stream) {
  dispatch_numeric(dtype, op_name(op), [&]<class T>() {
    with_op(op, [&]<BinaryOp Op>() {
      if constexpr (needs_floating(Op) && !std::is_floating_point_v<compute_t<T>>)
        throw_unsupported_dtype(op_name(Op), dtype, "a floating dtype");
      else
        launch_map<T, T, T>(op_name(Op), binary_detail::BinaryFn<Op, T>{}, args, stream);
    });
  });
}

}  // namespace accel::kernels
