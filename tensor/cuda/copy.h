// Copies where either side is a CUDA tensor: host <-> device through pinned staging, device <->
// device with the cast kernel, across devices through a peer copy. Broadcasting, strided views and
// dtype conversion as in cpu::copy.
#pragma once

#include "tensor/tensor.h"

namespace accel::cuda {

// src is already checked to broadcast to dst's shape. Host-to-device returns once src may be reused;
// device-to-host returns when dst holds the values.
void copy(const Tensor& dst, const Tensor& src);

}  // namespace accel::cuda
