// CPU copy: one strided loop per (dst dtype, src dtype) pair; contiguous runs of the same dtype
// are memcpy.
#include "tensor/cpu/copy.h"

#include <cstring>

#include "tensor/cpu/convert.h"
#include "tensor/cpu/loop.h"
#include "tensor/op_time.h"

namespace accel::cpu {

void copy(const Tensor& dst, const Tensor& src) {
  const op_time::Scope timed(op_time::Kind::copy_fill);
  const Strides src_strides = broadcast_strides(src.shape(), src.strides(), dst.shape());
  dispatch_all(dst.dtype(), "copy_", [&]<class D>() {
    dispatch_all(src.dtype(), "copy_", [&]<class S>() {
      D* out = static_cast<D*>(dst.data_ptr());
      const S* in = static_cast<const S*>(src.data_ptr());
      for_each_row<2>(dst.shape(), {dst.strides(), src_strides}, [&](const auto& off, const auto& step, int64_t n) {
        D* o = out + off[0];
        const S* i = in + off[1];
        if constexpr (std::is_same_v<D, S>) {
          if (step[0] == 1 && step[1] == 1) {
            std::memcpy(o, i, static_cast<size_t>(n) * sizeof(D));
            return;
          }
        }
        if (step[0] == 1 && step[1] == 1) {
          for (int64_t j = 0; j < n; ++j) o[j] = convert<D>(i[j]);
        } else {
          for (int64_t j = 0; j < n; ++j) o[j * step[0]] = convert<D>(i[j * step[1]]);
        }
      });
    });
  });
}

}  // namespace accel::cpu
