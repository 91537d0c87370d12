// Kernels that produce or consume bool masks: comparisons, where, logical_not and isfinite.
#include <type_traits>

#include "kernels/convert.cuh"
#include "kernels/elementwise.h"
#include "kernels/map.cuh"
#include "kernels/op_dispatch.h"

namespace accel::kernels {

namespace compare_detail {

template <CompareOp Op, class T>
struct CompareFn {
  __device__ bool operator()(T a, T b) const { return apply_compare<Op>(load(a), load(b)); }
};

template <class T>
struct WhereFn {
  __device__ T operator()(bool c, T a, T b) const { return c ? a : b; }
};

struct NotFn {
  __device__ bool operator()(bool x) const { return !x; }
};

template <class T>
struct IsFiniteFn {
  __device__ bool operator()(T x) const {
    if constexpr (std::is_floating_point_v<compute_t<T>>) return isfinite(load(x));
    else return (void)x, true;
  }
};

}  // namespace compare_detail

void launch_compare(CompareOp op, DType in_dtype, const StridedArgs<3>& args, cudaStream_t stream) {
  dispatch_all(in_dtype, op_name(op), [&]<class T>() {
    with_op(op, [&]<CompareOp Op>() {
      launch_map<bool, T, T>(op_name(Op), compare_detail::CompareFn<Op, T>{}, args, stream);
    });
  });
}

void launch_where(DType dtype, const StridedArgs<4>& args, cudaStream_t stream) {
  dispatch_all(dtype, "where", [&]<class T>() {
    launch_map<T, bool, T, T>("where", compare_detail::WhereFn<T>{}, args, stream);
  });
}

void launch_logical_not(const StridedArgs<2>& args, cudaStream_t stream) {
  launch_map<bool, bool>("logical_not", compare_detail::NotFn{}, args, stream);
}

void launch_isfinite(DType in_dtype, const StridedArgs<2>& args, cudaStream_t stream) {
  dispatch_all(in_dtype, "isfinite", [&]<class T>() {
    launch_map<bool, T>("isfinite", compare_detail::IsFiniteFn<T>{}, args, stream);
  });
}

}  // namespace accel::kernels
