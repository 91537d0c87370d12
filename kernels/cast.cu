// The cast kernel under every device copy: out = convert<To>(in) for each of the 7 x 7 dtype
// pairs, with broadcasting and strided operands.
#include "kernels/convert.cuh"
#include "kernels/elementwise.h"
#include "kernels/map.cuh"

namespace accel::kernels {

namespace cast_detail {
template <class To, class From>
struct CastFn {
  __device__ To operator()(From v) const { return convert<To>(v); }
};
}  // namespace cast_detail

void launch_cast(DType out_dtype, DType in_dtype, const StridedArgs<2>& args, cudaStream_t stream) {
  dispatch_all(out_dtype, "copy_", [&]<class To>() {
    dispatch_all(in_dtype, "copy_", [&]<class From>() {
      launch_map<To, From>("copy_", cast_detail::CastFn<To, From>{}, args, stream);
    });
  });
}

}  // namespace accel::kernels
