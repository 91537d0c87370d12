// In-place update and fill kernels (add_scaled, scale, fill) and the tanh and gelu backwards.
#include <type_traits>

#include "kernels/convert.cuh"
#include "kernels/elementwise.h"
#include "kernels/map.cuh"

namespace accel::kernels {

namespace update_detail {

template <class T>
struct AddScaledFn {
  compute_t<T> alpha;
  __device__ T operator()(T s, T o) const { return store<T>(load(s) + alpha * load(o)); }
};

template <class T>
struct ScaleFn {
  compute_t<T> value;
  __device__ T operator()(T s) const { return store<T>(load(s) * value); }
};

template <class T>
struct FillFn {
  T value;
  __device__ T operator()() const { return value; }
};

template <class T>
struct TanhBackwardFn {
  __device__ T operator()(T g, T x) const { return store<T>(load(g) * tanh_grad(load(x))); }
};

template <class T>
struct GeluBackwardFn {
  __device__ T operator()(T g, T x) const { return store<T>(load(g) * gelu_tanh_grad(load(x))); }
};

}  // namespace update_detail

void launch_add_scaled(DType dtype, const StridedArgs<3>& args, double alpha, cudaStream_t stream) {
  dispatch_numeric(dtype, "add_", [&]<class T>() {
    const update_detail::AddScaledFn<T> fn{static_cast<compute_t<T>>(alpha)};
    launch_map<T, T, T>("add_", fn, args, stream);
  });
}

void launch_scale(DType dtype, const StridedArgs<2>& args, double value, cudaStream_t stream) {
  dispatch_numeric(dtype, "mul_", [&]<class T>() {
    const update_detail::ScaleFn<T> fn{static_cast<compute_t<T>>(value)};
    launch_map<T, T>("mul_", fn, args, stream);
  });
}

void launch_fill(DType dtype, const StridedArgs<1>& args, const void* value, cudaStream_t stream) {
  dispatch_all(dtype, "fill_", [&]<class T>() {
    update_detail::FillFn<T> fn;
    memcpy(&fn.value, value, sizeof(T));
    launch_map<T>("fill_", fn, args, stream);
  });
}

void launch_tanh_backward(DType dtype, const StridedArgs<3>& args, cudaStream_t stream) {
  dispatch_floating(dtype, "tanh_backward", [&]<class T>() {
    launch_map<T, T, T>("tanh_backward", update_detail::TanhBackwardFn<T>{}, args, stream);
  });
}

void launch_gelu_backward(DType dtype, const StridedArgs<3>& args, cudaStream_t stream) {
  dispatch_floating(dtype, "gelu_backward", [&]<class T>() {
    launch_map<T, T, T>("gelu_backward", update_detail::GeluBackwardFn<T>{}, args, stream);
  });
}

}  // namespace accel::kernels
