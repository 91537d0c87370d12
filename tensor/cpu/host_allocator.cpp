// The host block cache: blocks of at least kCachedMin bytes are rounded up to whole pages and, when
// freed, kept in a free list for their size until the cache holds kCacheLimit bytes.
#include "tensor/cpu/host_allocator.h"

#include <fmt/format.h>

#include <algorithm>
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
  HostCacheStats stats;
};

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

}  // namespace

void* host_allocate(size_t nbytes) {
  const size_t bytes = rounded(nbytes);
  if (bytes < kCachedMin) return system_allocate(bytes, nbytes);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.free_blocks.find(bytes);
    if (it != c.free_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.stats.cached_bytes -= bytes;
      ++c.stats.hits;
      return p;
    }
  }
  return system_allocate(bytes, nbytes);
}

void host_free(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  const size_t bytes = rounded(nbytes);
  if (bytes >= kCachedMin) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.stats.cached_bytes + bytes <= kCacheLimit) {
      c.free_blocks[bytes].push_back(ptr);
      c.stats.cached_bytes += bytes;
      return;
    }
  }
  std::free(ptr);
}

HostCacheStats host_cache_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.stats;
}

void host_empty_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (auto& [bytes, blocks] : c.free_blocks)
    for (void* p : blocks) std::free(p);
  c.free_blocks.clear();
  c.stats.cached_bytes = 0;
}

}  // namespace accel::cpu
