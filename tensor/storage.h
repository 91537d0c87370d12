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
  // release() gives the bytes back while the views keep this Storage; reallocate() takes them again
  // (contents undefined). ZeRO-3 frees a unit's gathered parameters this way between uses, and a graph
  // that saved one sees it again once it is gathered back. Not for adopted memory.
  void release();
  void reallocate();
  bool is_released() const { return released_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void reallocate_bytes();  // data_ and deleter_ for nbytes_ on device_

  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  std::function<void(void*)> deleter_;
  bool owned_ = false;  // allocated by the first constructor, so reallocate() knows how
  bool released_ = false;
};

}  // namespace accel
