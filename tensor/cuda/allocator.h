// The caching allocator behind every CUDA tensor. Memory comes from cudaMalloc in segments and is
// handed out as blocks; a freed block goes back to a per-device cache, not to CUDA, so a training
// step that repeats the shapes of the last one makes no cudaMalloc at all (docs/gpu.md).
//
// Stream rule: every block is used on its device's compute stream. Freeing returns the block to the
// cache at once, while kernels that use it may still be queued; that is safe because the next user
// of the block queues its work on the same stream, after them. A block that another stream (the
// communication stream) uses must be registered with record_stream: it then goes back to the cache
// only once the work queued on that stream at free time has finished.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "tensor/device.h"

namespace accel::cuda {

// nbytes of device memory on device, at least 512-byte aligned; nullptr for 0 bytes. Throws
// accel::Error when the device is missing or out of memory (after the cache has been released).
void* device_allocate(size_t nbytes, Device device);
// Returns a block from device_allocate to the cache. Never throws (it runs in destructors).
void device_free(void* ptr, Device device);
// Marks ptr (from device_allocate) as used by work queued on stream; see the stream rule above.
void record_stream(void* ptr, Device device, cudaStream_t stream);

struct AllocatorStats {
  size_t allocated_bytes = 0;       // in blocks handed out (sizes rounded up to 512 bytes)
  size_t peak_allocated_bytes = 0;  // the most allocated_bytes reached since the last reset
  size_t reserved_bytes = 0;        // held from cudaMalloc: allocated plus cached
  size_t cached_bytes = 0;          // reserved but free, kept for reuse
  int64_t allocations = 0;          // device_allocate calls served
  int64_t device_mallocs = 0;       // cudaMalloc calls made
  int64_t device_frees = 0;         // cudaFree calls made
};
AllocatorStats allocator_stats(Device device);
void reset_peak_stats(Device device);
// Waits for the device, then gives every wholly free segment back to CUDA.
void empty_cache(Device device);

// The block size a request of nbytes takes: a multiple of 512 bytes, at least 512.
size_t allocation_size(size_t nbytes);

}  // namespace accel::cuda
