// Host <-> device transfers through pinned (page-locked) staging buffers. Pageable host memory
// cannot be read by the copy engines directly, so each transfer is cut into chunks that pass
// through a small ring of pinned buffers per device, overlapping the host memcpy of one chunk with
// the DMA of the next.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/device.h"

namespace accel::cuda {

// Copies bytes from host memory to device memory, ordered on device's compute stream. Returns once
// src may be reused; the device side may still be in flight.
void upload(void* dst_device, const void* src_host, size_t bytes, Device device);
// Copies bytes from device memory (as left by the work queued on the compute stream so far) to host
// memory; returns when dst holds them.
void download(void* dst_host, const void* src_device, size_t bytes, Device device);

struct PinnedStats {
  size_t bytes = 0;     // pinned host memory held for staging, over all devices
  int64_t buffers = 0;
};
PinnedStats pinned_stats();

}  // namespace accel::cuda
