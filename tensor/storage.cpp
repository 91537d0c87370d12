// Storage allocation: 64-byte aligned host memory from the host block cache on the CPU; CUDA memory
// comes from the caching allocator of the CUDA backend.
#include "tensor/storage.h"

#include <fmt/format.h>

#include <cstdlib>

#include "accel_config.h"
#include "kernels/error.h"
#include "tensor/cpu/host_allocator.h"

#if ACCEL_WITH_CUDA
#include "tensor/cuda/allocator.h"
#endif

namespace accel {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device), owned_(true) { reallocate_bytes(); }

std::shared_ptr<Storage> Storage::unallocated(size_t nbytes, Device device) {
  auto storage = std::make_shared<Storage>(nullptr, nbytes, device, nullptr);
  storage->owned_ = true;
  storage->released_ = true;
  return storage;
}

std::shared_ptr<Storage> Storage::meta(size_t nbytes, Device device, std::shared_ptr<InitRecipe> recipe) {
  if (!recipe) throw Error(fmt::format("Storage::meta: {} bytes on {} got no recipe", nbytes, device.str()));
  auto storage = std::make_shared<Storage>(nullptr, nbytes, device, nullptr);
  storage->recipe_ = std::move(recipe);
  return storage;
}

std::shared_ptr<InitRecipe> Storage::allocate_from_meta() {
  if (!recipe_) throw Error(fmt::format("Storage::allocate_from_meta: the {} bytes on {} are not meta", nbytes_,
                                        device_.str()));
  owned_ = true;
  reallocate_bytes();
  return std::move(recipe_);
}

void Storage::release() {
  if (recipe_) throw Error(fmt::format("Storage::release: {} bytes on {} are meta (never allocated)", nbytes_, device_.str()));
  if (!owned_) throw Error(fmt::format("Storage::release: {} bytes on {} were adopted, not allocated here", nbytes_, device_.str()));
  if (released_) return;
  if (data_ != nullptr) deleter_(data_);
  data_ = nullptr;
  released_ = true;
}

void Storage::reallocate() {
  if (!released_) return;
  reallocate_bytes();
  released_ = false;
}

void Storage::reallocate_bytes() {
  const size_t nbytes = nbytes_;
  const Device device = device_;
  if (device.is_cpu()) {
    data_ = cpu::host_allocate(nbytes);
    deleter_ = [nbytes](void* p) { cpu::host_free(p, nbytes); };
    return;
  }
#if ACCEL_WITH_CUDA
  data_ = cuda::device_allocate(nbytes, device);
  deleter_ = [device](void* p) { cuda::device_free(p, device); };
#else
  throw Error(fmt::format("Storage: cannot allocate {} bytes on {}: accel was built without CUDA", nbytes,
                          device.str()));
#endif
}

Storage::Storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter)
    : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)) {}

Storage::~Storage() {
  if (deleter_ && data_ != nullptr) deleter_(data_);
}

}  // namespace accel
