// Storage allocation: 64-byte aligned host memory on the CPU; CUDA memory comes from the caching
// allocator of the CUDA backend.
#include "tensor/storage.h"

#include <fmt/format.h>

#include <cstdlib>

#include "accel_config.h"
#include "tensor/error.h"

#if ACCEL_WITH_CUDA
#include "tensor/cuda/allocator.h"
#endif

namespace accel {

namespace {
constexpr size_t kHostAlignment = 64;
}

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (device.is_cpu()) {
    const size_t rounded = (std::max<size_t>(nbytes, 1) + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    data_ = std::aligned_alloc(kHostAlignment, rounded);
    if (data_ == nullptr)
      throw Error(fmt::format("Storage: cannot allocate {} bytes of host memory", nbytes));
    deleter_ = [](void* p) { std::free(p); };
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
