// The host block cache under CPU storages: a freed large block is handed to the next request of the
// same size, small blocks bypass it, every block is 64-byte aligned, and emptying it frees the blocks.
// The bytes in use and their peak are counted for every block, cached or not.
#include <doctest/doctest.h>

#include <cstdint>

#include "accel.h"
#include "tensor/cpu/host_allocator.h"

using namespace accel;

TEST_CASE("a freed large block serves the next allocation of the same size") {
  cpu::host_empty_cache();
  const size_t hits = cpu::host_allocator_stats().hits;
  void* first = nullptr;
  {
    const Tensor t = zeros({1000, 300});  // 1.2 MB
    first = t.data_ptr();
    CHECK(reinterpret_cast<uintptr_t>(first) % 64 == 0);
  }
  CHECK(cpu::host_allocator_stats().cached_bytes >= 1200000);
  const Tensor again = empty({300, 1000});  // same byte count, another shape
  CHECK(again.data_ptr() == first);
  CHECK(cpu::host_allocator_stats().hits == hits + 1);
  CHECK(cpu::host_allocator_stats().cached_bytes == 0);
  // A different size is not served from a cached block.
  { const Tensor t = empty({1000, 301}); }
  const Tensor other = empty({1000, 302});
  CHECK(cpu::host_allocator_stats().hits == hits + 1);
}

TEST_CASE("small blocks bypass the cache; emptying it releases what it holds") {
  cpu::host_empty_cache();
  { const Tensor small = ones({100}); }
  CHECK(cpu::host_allocator_stats().cached_bytes == 0);
  void* p = cpu::host_allocate(1 << 20);
  CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
  cpu::host_free(p, 1 << 20);
  CHECK(cpu::host_allocator_stats().cached_bytes == (1 << 20));
  cpu::host_empty_cache();
  CHECK(cpu::host_allocator_stats().cached_bytes == 0);
  // Zero bytes still gives a distinct, freeable block.
  void* z = cpu::host_allocate(0);
  CHECK(z != nullptr);
  cpu::host_free(z, 0);
}

TEST_CASE("the bytes in use and their peak follow the storages, small and large, cached or not") {
  cpu::host_empty_cache();
  const MemoryStats before = memory_stats_of(Device::cpu());
  reset_peak_memory_stats_of(Device::cpu());
  CHECK(memory_stats_of(Device::cpu()).peak_allocated_bytes == before.allocated_bytes);
  {
    const Tensor large = empty({1 << 18});  // 1 MiB: whole pages, through the cache
    const Tensor small = empty({10});       // 40 bytes: rounded to 64, past the cache
    const MemoryStats now = memory_stats_of(Device::cpu());
    CHECK(now.allocated_bytes == before.allocated_bytes + (1 << 20) + 64);
    CHECK(now.allocations == before.allocations + 2);
    CHECK(now.peak_allocated_bytes == now.allocated_bytes);
  }
  const MemoryStats after = memory_stats_of(Device::cpu());
  CHECK(after.allocated_bytes == before.allocated_bytes);
  CHECK(after.peak_allocated_bytes == before.allocated_bytes + (1 << 20) + 64);  // the peak stays
  CHECK(after.cached_bytes == (1 << 20));                                      // the large block waits
  CHECK(after.reserved_bytes == after.allocated_bytes + after.cached_bytes);
  // A cache hit is counted as in use again; the peak moves only past its old value.
  { const Tensor again = empty({1 << 18}); CHECK(memory_stats_of(Device::cpu()).allocated_bytes == after.allocated_bytes + (1 << 20)); }
  CHECK(memory_stats_of(Device::cpu()).peak_allocated_bytes == after.peak_allocated_bytes);
  reset_peak_memory_stats_of(Device::cpu());
  CHECK(memory_stats_of(Device::cpu()).peak_allocated_bytes == after.allocated_bytes);
  cpu::host_empty_cache();
}
