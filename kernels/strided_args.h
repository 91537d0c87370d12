// The operand layout that tensor/cuda hands to an elementwise kernel: pointers to each operand's
// first element and, after dims are coalesced, at most kMaxDims sizes and element strides. Plain C++
// so the host side builds it without nvcc.
#pragma once

#include <cstdint>

namespace accel::kernels {

inline constexpr int kMaxDims = 8;
// The strided kernel indexes in 32 bits; the host splits bigger layouts into several launches.
inline constexpr int64_t kMaxStridedElements = int64_t{1} << 31;

// N operands; operand 0 is the output.
template <int N>
struct StridedArgs {
  void* data[N] = {};
  int ndim = 1;
  int64_t numel = 0;
  int64_t sizes[kMaxDims] = {};       // outermost first
  int64_t strides[N][kMaxDims] = {};  // in elements; 0 broadcasts
  // The dense fast path: one dim, the output and every input at unit stride or a broadcast
  // single element (stride 0), and every unit-stride pointer aligned to 16 bytes.
  bool dense = false;
};

}  // namespace accel::kernels
