// ACCEL_DISPATCH: runs cpu::fn or cuda::fn by the device of an op's tensors. Builds without CUDA
// throw a clear error for device tensors instead.
#pragma once

#include "accel_config.h"
#include "tensor/device.h"

namespace accel {
[[noreturn]] void throw_no_cuda(const char* op, Device device);
[[noreturn]] void throw_no_cuda_kernel(const char* op, Device device);
}

// For ops whose CUDA kernels are not written yet: CPU tensors run, device tensors get a clear error.
#define ACCEL_DISPATCH_CPU_ONLY(op, device, fn, ...)  \
  do {                                                \
    if ((device).is_cpu())                            \
      ::accel::cpu::fn(__VA_ARGS__);                  \
    else                                              \
      ::accel::throw_no_cuda_kernel((op), (device));  \
  } while (0)

#if ACCEL_WITH_CUDA
#define ACCEL_DISPATCH(op, device, fn, ...) \
  do {                                      \
    if ((device).is_cpu())                  \
      ::accel::cpu::fn(__VA_ARGS__);        \
    else                                    \
      ::accel::cuda::fn(__VA_ARGS__);       \
  } while (0)
#else
#define ACCEL_DISPATCH(op, device, fn, ...)   \
  do {                                        \
    if ((device).is_cpu())                    \
      ::accel::cpu::fn(__VA_ARGS__);          \
    else                                      \
      ::accel::throw_no_cuda((op), (device)); \
  } while (0)
#endif
