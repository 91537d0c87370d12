// Device: where a tensor's storage lives (the CPU, or CUDA GPU number index).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace accel {

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static constexpr Device cpu() { return Device{DeviceType::cpu, 0}; }
  static constexpr Device cuda(int index = 0) { return Device{DeviceType::cuda, index}; }
  // Parses "cpu", "cuda" or "cuda:N"; throws accel::Error on anything else.
  static Device parse(const std::string& text);

  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  std::string str() const;  // "cpu" or "cuda:N"
  bool operator==(const Device&) const = default;
};

// GPUs this process can use: 0 without a driver or GPU, and in builds without CUDA.
int cuda_device_count();
// Frees the blocks an allocator caches for reuse on device (the pinned host blocks for a CPU one);
// storages in use are untouched.
void empty_cache_of(Device device);

// What the allocator of one device holds, in bytes (host: the CPU storages' allocator).
struct MemoryStats {
  size_t allocated_bytes = 0;       // in storages now (block sizes as the allocator rounds them)
  size_t peak_allocated_bytes = 0;  // the most allocated_bytes reached since the last reset
  size_t reserved_bytes = 0;        // taken from the system: allocated plus cached
  size_t cached_bytes = 0;          // free blocks kept for reuse
  int64_t allocations = 0;          // blocks handed out so far
};
MemoryStats memory_stats_of(Device device);
// The peak starts again from what is allocated now.
void reset_peak_memory_stats_of(Device device);

}  // namespace accel
