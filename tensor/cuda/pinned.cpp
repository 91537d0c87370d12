// The staging rings: kBuffers pinned buffers of kChunk bytes per device, each with an event that
// marks when the copy engine is done with it.
#include "tensor/cuda/pinned.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <mutex>

#include "kernels/cuda_check.h"
#include "kernels/error.h"
#include "tensor/cuda/device.h"
#include "tensor/cuda/stream.h"

namespace accel::cuda {

namespace {

constexpr size_t kChunk = size_t{8} << 20;
constexpr int kBuffers = 4;
constexpr int kMaxDevices = 64;

std::mutex stats_mutex;
PinnedStats totals;  // guarded by stats_mutex

struct Buffer {
  void* host = nullptr;
  cudaEvent_t done = nullptr;  // recorded after the last copy that used host
};

class StagingRing {
 public:
  explicit StagingRing(int device) : device_(device) {}

  void upload(char* dst, const char* src, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    const DeviceGuard guard(device_);
    const cudaStream_t stream = compute_stream(device_);
    for (size_t off = 0; off < bytes; off += kChunk) {
      const size_t n = std::min(kChunk, bytes - off);
      Buffer& b = next();
      ACCEL_CUDA_CHECK(cudaEventSynchronize(b.done), "cudaEventSynchronize(staging buffer)");
      std::memcpy(b.host, src + off, n);
      ACCEL_CUDA_CHECK(cudaMemcpyAsync(dst + off, b.host, n, cudaMemcpyHostToDevice, stream),
                       "cudaMemcpyAsync({} bytes, host to device)", n);
      ACCEL_CUDA_CHECK(cudaEventRecord(b.done, stream), "cudaEventRecord(staging buffer)");
    }
  }

  void download(char* dst, const char* src, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    const DeviceGuard guard(device_);
    const cudaStream_t stream = compute_stream(device_);
    // Chunk i is queued before chunk i - 1 is copied out on the host, so DMA and memcpy overlap.
    Buffer* previous = nullptr;
    size_t previous_off = 0, previous_n = 0;
    for (size_t off = 0; off < bytes; off += kChunk) {
      const size_t n = std::min(kChunk, bytes - off);
      Buffer& b = next();
      ACCEL_CUDA_CHECK(cudaEventSynchronize(b.done), "cudaEventSynchronize(staging buffer)");
      ACCEL_CUDA_CHECK(cudaMemcpyAsync(b.host, src + off, n, cudaMemcpyDeviceToHost, stream),
                       "cudaMemcpyAsync({} bytes, device to host)", n);
      ACCEL_CUDA_CHECK(cudaEventRecord(b.done, stream), "cudaEventRecord(staging buffer)");
      if (previous != nullptr) drain(*previous, dst + previous_off, previous_n);
      previous = &b;
      previous_off = off;
      previous_n = n;
    }
    if (previous != nullptr) drain(*previous, dst + previous_off, previous_n);
  }

 private:
  // Waits for b's copy to land, then moves its bytes to dst.
  static void drain(const Buffer& b, char* dst, size_t n) {
    ACCEL_CUDA_CHECK(cudaEventSynchronize(b.done), "cudaMemcpyAsync(device to host)");
    std::memcpy(dst, b.host, n);
  }

  // The next buffer of the ring, allocated on first use.
  Buffer& next() {
    Buffer& b = ring_[static_cast<size_t>(cursor_)];
    cursor_ = (cursor_ + 1) % kBuffers;
    if (b.host == nullptr) {
      ACCEL_CUDA_CHECK(cudaHostAlloc(&b.host, kChunk, cudaHostAllocDefault), "cudaHostAlloc({} bytes)", kChunk);
      ACCEL_CUDA_CHECK(cudaEventCreateWithFlags(&b.done, cudaEventDisableTiming), "cudaEventCreateWithFlags");
      std::lock_guard<std::mutex> stats_lock(stats_mutex);
      totals.bytes += kChunk;
      totals.buffers += 1;
    }
    return b;
  }

  const int device_;
  std::mutex mutex_;
  std::array<Buffer, kBuffers> ring_{};
  int cursor_ = 0;
};

StagingRing& ring_for(const char* op, Device device) {
  check_device(op, device);
  if (device.index >= kMaxDevices)
    throw Error(fmt::format("{}: {} exceeds the {} devices accel supports", op, device.str(), kMaxDevices));
  static std::mutex mutex;
  // Never destroyed: pinned memory is returned to the system when the process exits.
  static auto* rings = new std::array<std::unique_ptr<StagingRing>, kMaxDevices>();
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = (*rings)[static_cast<size_t>(device.index)];
  if (!slot) slot = std::make_unique<StagingRing>(device.index);
  return *slot;
}

}  // namespace

void upload(void* dst_device, const void* src_host, size_t bytes, Device device) {
  if (bytes == 0) return;
  ring_for("upload", device).upload(static_cast<char*>(dst_device), static_cast<const char*>(src_host), bytes);
}

void download(void* dst_host, const void* src_device, size_t bytes, Device device) {
  if (bytes == 0) return;
  ring_for("download", device).download(static_cast<char*>(dst_host), static_cast<const char*>(src_device), bytes);
}

PinnedStats pinned_stats() {
  std::lock_guard<std::mutex> lock(stats_mutex);
  return totals;
}

}  // namespace accel::cuda
