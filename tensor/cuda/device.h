// CUDA devices: how many are visible, which one is current, and a guard that makes a tensor's
// device current for the duration of a call.
#pragma once

#include <string>

#include "tensor/device.h"

namespace accel::cuda {

// Visible CUDA devices; 0 (never an exception) when there is no driver or no GPU. Counted once per
// process, since CUDA fixes the set at initialisation.
int device_count();
bool is_available();
// Why device_count() is 0, e.g. "cudaGetDeviceCount: no CUDA-capable device is detected
// (cudaErrorNoDevice)"; empty when devices are visible.
std::string unavailable_reason();

// Throws unless device is a visible CUDA device: "op: cuda:1 is not available: 1 CUDA device visible".
void check_device(const char* op, Device device);

struct DeviceProperties {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  size_t total_memory = 0;   // bytes
  size_t l2_cache = 0;       // bytes
};
DeviceProperties device_properties(int device);

// Makes `device` current on this thread and restores the previous one on destruction.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  explicit DeviceGuard(Device device) : DeviceGuard(device.index) {}
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  int current_ = -1;
};

}  // namespace accel::cuda
