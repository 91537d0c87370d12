// The host block cache: blocks of at least kCachedMin bytes are rounded up to whole pages and, when
// freed, kept in a free list for their size until the cache holds kCacheLimit bytes. The bytes in use
// are counted with atomics, since small blocks never take the cache's lock.
#include "tensor/cpu/host_allocator.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kernels/error.h"

namespace accel::cpu {

namespace {

constexpr size_t kAlignment = 64;
// Smaller blocks come from glibc's bins, which already reuse them without touching the kernel.
constexpr size_t kCachedMin = size_t{64} << 10;
constexpr size_t kPage = 4096;
// Beyond this, freed blocks go back to the system: a program that keeps changing sizes does not grow.
constexpr size_t kCacheLimit = size_t{2} << 30;

struct Cache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;  // by rounded size
  size_t cached_bytes = 0;
  size_t hits = 0;
};

struct InUse {
  std::atomic<size_t> bytes{0}, peak{0};
  std::atomic<int64_t> allocations{0};
};

InUse& in_use() {
  static InUse* u = new InUse;  // never destroyed, as the cache
  return *u;
}

void count_allocation(size_t bytes) {
  InUse& u = in_use();
  u.allocations.fetch_add(1, std::memory_order_relaxed);
  const size_t now = u.bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  size_t peak = u.peak.load(std::memory_order_relaxed);
  while (now > peak && !u.peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void count_free(size_t bytes) { in_use().bytes.fetch_sub(bytes, std::memory_order_relaxed); }

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: storages may be freed during static destruction
  return *c;
}

size_t rounded(size_t nbytes) {
  const size_t n = std::max<size_t>(nbytes, 1);
  // No request this large can be met, and rounding it up would wrap to a small block.
  if (n > std::numeric_limits<size_t>::max() - kPage)
    throw Error(fmt::format("Storage: cannot allocate {} bytes of host memory", nbytes));
  return n >= kCachedMin ? (n + kPage - 1) / kPage * kPage : (n + kAlignment - 1) / kAlignment * kAlignment;
}

void* system_allocate(size_t bytes, size_t requested) {
  void* p = std::aligned_alloc(kAlignment, bytes);
  if (p == nullptr) throw Error(fmt::format("Storage: cannot allocate {} bytes of host memory", requested));
  return p;
}

void* take_cached(size_t bytes) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.free_blocks.find(bytes);
  if (it == c.free_blocks.end() || it->second.empty()) return nullptr;
  void* p = it->second.back();
  it->second.pop_back();
  c.cached_bytes -= bytes;
  ++c.hits;
  return p;
}

}  // namespace

void* host_allocate(size_t nbytes) {
  const size_t bytes = rounded(nbytes);
  void* p = bytes >= kCachedMin ? take_cached(bytes) : nullptr;
  if (p == nullptr) p = system_allocate(bytes, nbytes);
  count_allocation(bytes);
  return p;
}

void host_free(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  const size_t bytes = rounded(nbytes);
  count_free(bytes);
  if (bytes >= kCachedMin) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.cached_bytes + bytes <= kCacheLimit) {
      c.free_blocks[bytes].push_back(ptr);
      c.cached_bytes += bytes;
      return;
    }
  }
  std::free(ptr);
}

HostAllocatorStats host_allocator_stats() {
  HostAllocatorStats stats;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    stats.cached_bytes = c.cached_bytes;
    stats.hits = c.hits;
  }
  const InUse& u = in_use();
  stats.allocated_bytes = u.bytes.load(std::memory_order_relaxed);
  stats.peak_allocated_bytes = u.peak.load(std::memory_order_relaxed);
  stats.allocations = u.allocations.load(std::memory_order_relaxed);
  return stats;
}

void host_reset_peak_stats() {
  InUse& u = in_use();
  u.peak.store(u.bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

void host_empty_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (auto& [bytes, blocks] : c.free_blocks)
    for (void* p : blocks) std::free(p);
  c.free_blocks.clear();
  c.cached_bytes = 0;
}

}  // namespace accel::cpu
