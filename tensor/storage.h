// Storage: one owned block of bytes on a device, shared by every tensor view of it.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "tensor/device.h"

namespace accel {

class Storage {
 public:
  // Allocates nbytes on device through that device's allocator (the caching allocator on CUDA).
  Storage(size_t nbytes, Device device);
  // Adopts memory allocated elsewhere; deleter releases it.
  Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  std::function<void(void*)> deleter_;
};

}  // namespace accel
