// Host memory for CPU storages: 64-byte aligned blocks, and a cache that hands a freed large block to
// the next request of the same rounded size. A training step allocates the same sizes every step;
// without the cache glibc gives such blocks back to the kernel (munmap, heap trim), and every step
// pays page faults and page zeroing again on first touch. It also counts the bytes in use and their
// peak, which memory_stats_of(Device::cpu()) reports.
#pragma once

#include <cstddef>
#include <cstdint>

namespace accel::cpu {

// A block of at least nbytes (1 when 0), 64-byte aligned. Throws Error when the host is out of memory.
void* host_allocate(size_t nbytes);
// Returns a block from host_allocate with the same nbytes.
void host_free(void* ptr, size_t nbytes);

struct HostAllocatorStats {
  size_t allocated_bytes = 0;       // in blocks handed out and not yet freed (sizes as rounded)
  size_t peak_allocated_bytes = 0;  // the most allocated_bytes reached since the last reset
  size_t cached_bytes = 0;          // held for reuse, not in use by any storage
  size_t hits = 0;                  // allocations served from the cache so far
  int64_t allocations = 0;          // host_allocate calls served so far
};
HostAllocatorStats host_allocator_stats();
// The peak starts again from the bytes in use now.
void host_reset_peak_stats();
// Frees every cached block (storages in use are untouched).
void host_empty_cache();

}  // namespace accel::cpu
