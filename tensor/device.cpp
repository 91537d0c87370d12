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

void throw_no_cuda(const char* op, Device device) {
  throw Error(fmt::format("{}: tensor on {} but accel was built without CUDA", op, device.str()));
}

}  // namespace accel
