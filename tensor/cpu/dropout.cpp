// CPU dropout: element i's decision depends only on (seed, offset, i), so any split of the loop
// across threads, or a CUDA grid, draws the same mask.
#include "tensor/cpu/dropout.h"

#include "kernels/nn_math.h"
#include "tensor/cpu/loop.h"
#include "tensor/cpu/map.h"

namespace accel::cpu {

void dropout(const Tensor& out, const Tensor& keep_mask, const Tensor& x, float p, double scale, uint64_t seed,
             uint64_t offset) {
  const int64_t n = x.numel();
  dispatch_floating(x.dtype(), "dropout", [&]<class T>() {
    using C = compute_t<T>;
    const T* src = static_cast<const T*>(x.data_ptr());
    T* dst = static_cast<T*>(out.data_ptr());
    bool* mask = static_cast<bool*>(keep_mask.data_ptr());
    const C s = static_cast<C>(scale);
    // Each element costs a Philox block, so even small tensors are worth threads.
#pragma omp parallel for if (n > kParallelGrain / 8)
    for (int64_t i = 0; i < n; ++i) {
      const bool keep = dropout_keep(seed, offset, static_cast<uint64_t>(i), p);
      mask[i] = keep;
      dst[i] = store<T>(dropout_elem(load(src[i]), keep, s));
    }
  });
}

}  // namespace accel::cpu
