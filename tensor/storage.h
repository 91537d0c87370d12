// Storage: one owned block of bytes on a device, shared by every tensor view of it.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "tensor/device.h"

namespace accel {

class InitRecipe;  // tensor/meta_tensor.h

class Storage {
 public:
  // Allocates nbytes on device through that device's allocator (the caching allocator on CUDA).
  Storage(size_t nbytes, Device device);
  // Adopts memory allocated elsewhere; deleter releases it.
  Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter);
  // A storage that starts without bytes, as one that was released: a flat buffer that is filled only
  // when it is first gathered (ZeRO-3's units of deferred-init parameters).
  static std::shared_ptr<Storage> unallocated(size_t nbytes, Device device);
  // A meta storage: a size and a device but no bytes, and the recipe of what they would hold
  // (DeferredInit's tensors). Its data cannot be read until materialize_in_place().
  static std::shared_ptr<Storage> meta(size_t nbytes, Device device, std::shared_ptr<InitRecipe> recipe);
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
  bool is_meta() const { return recipe_ != nullptr; }
  // The recipe of a meta storage; null otherwise.
  const std::shared_ptr<InitRecipe>& recipe() const { return recipe_; }
  // Turns a meta storage into an allocated one (contents undefined) and hands back its recipe, for
  // the caller to write the values it describes.
  std::shared_ptr<InitRecipe> allocate_from_meta();
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
  std::shared_ptr<InitRecipe> recipe_;  // set while the storage is meta
};

}  // namespace accel
