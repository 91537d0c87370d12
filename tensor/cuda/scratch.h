// Scratch: device memory for one launch (workspaces, tables, flags) from the caching allocator. It
// may be freed right after the launch is queued: the allocator's stream rule (tensor/cuda/allocator.h)
// keeps the block from being reused before the queued kernels have run.
#pragma once

#include <cstddef>

#include "tensor/cuda/allocator.h"

namespace accel::cuda {

class Scratch {
 public:
  Scratch(size_t nbytes, Device device) : ptr_(device_allocate(nbytes, device)), device_(device) {}
  ~Scratch() { device_free(ptr_, device_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_;
  Device device_;
};

}  // namespace accel::cuda
