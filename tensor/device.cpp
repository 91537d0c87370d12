// Parsing and printing of devices.
#include "tensor/device.h"

#include <fmt/format.h>

#include "kernels/error.h"
#include "tensor/cpu/host_allocator.h"
#include "tensor/dispatch.h"

#if ACCEL_WITH_CUDA
#include "tensor/cuda/allocator.h"
#include "tensor/cuda/device.h"
#endif

namespace accel {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    const std::string number = text.substr(5);
    size_t used = 0;
    int index = -1;
    try {
      index = std::stoi(number, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == number.size() && !number.empty() && index >= 0) return cuda(index);
  }
  throw Error(fmt::format("Device::parse: cannot parse '{}', expected cpu, cuda or cuda:N", text));
}

std::string Device::str() const { return is_cpu() ? "cpu" : fmt::format("cuda:{}", index); }

}  // namespace accel

namespace accel {

int cuda_device_count() {
#if ACCEL_WITH_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

void empty_cache_of(Device device) {
  if (device.is_cpu()) return cpu::host_empty_cache();
#if ACCEL_WITH_CUDA
  cuda::empty_cache(device);
#else
  throw_no_cuda("empty_cache_of", device);
#endif
}

MemoryStats memory_stats_of(Device device) {
  MemoryStats m;
  if (device.is_cpu()) {
    const cpu::HostAllocatorStats s = cpu::host_allocator_stats();
    m.allocated_bytes = s.allocated_bytes;
    m.peak_allocated_bytes = s.peak_allocated_bytes;
    m.cached_bytes = s.cached_bytes;
    m.reserved_bytes = s.allocated_bytes + s.cached_bytes;
    m.allocations = s.allocations;
    return m;
  }
#if ACCEL_WITH_CUDA
  const cuda::AllocatorStats s = cuda::allocator_stats(device);
  m.allocated_bytes = s.allocated_bytes;
  m.peak_allocated_bytes = s.peak_allocated_bytes;
  m.reserved_bytes = s.reserved_bytes;
  m.cached_bytes = s.cached_bytes;
  m.allocations = s.allocations;
  return m;
#else
  throw_no_cuda("memory_stats_of", device);
#endif
}

void reset_peak_memory_stats_of(Device device) {
  if (device.is_cpu()) return cpu::host_reset_peak_stats();
#if ACCEL_WITH_CUDA
  cuda::reset_peak_stats(device);
#else
  throw_no_cuda("reset_peak_memory_stats_of", device);
#endif
}

void throw_no_cuda(const char* op, Device device) {
  throw Error(fmt::format("{}: tensor on {} but accel was built without CUDA", op, device.str()));
}

}  // namespace accel
