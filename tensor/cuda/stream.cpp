// Per-device compute and communication streams, created lazily.
#include "tensor/cuda/stream.h"

#include <fmt/format.h>

#include <array>
#include <mutex>

#include "kernels/cuda_check.h"
#include "kernels/error.h"
#include "tensor/cuda/device.h"

namespace accel::cuda {

namespace {

constexpr int kMaxDevices = 64;

struct Streams {
  std::mutex mutex;
  std::array<cudaStream_t, kMaxDevices> compute{};
  std::array<cudaStream_t, kMaxDevices> comm{};
};

Streams& streams() {
  static Streams* s = new Streams();  // never destroyed: streams may be used during static teardown
  return *s;
}

cudaStream_t get_or_create(int device, bool comm) {
  check_device("compute_stream", Device::cuda(device));
  if (device >= kMaxDevices)
    throw Error(fmt::format("compute_stream: device {} exceeds the {} devices accel supports", device, kMaxDevices));
  Streams& s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  cudaStream_t& slot = comm ? s.comm[device] : s.compute[device];
  if (slot == nullptr) {
    DeviceGuard guard(device);
    ACCEL_CUDA_CHECK(cudaStreamCreateWithFlags(&slot, cudaStreamNonBlocking), "cudaStreamCreateWithFlags({} stream)",
                     comm ? "communication" : "compute");
  }
  return slot;
}

}  // namespace

cudaStream_t compute_stream(int device) { return get_or_create(device, false); }
cudaStream_t compute_stream(Device device) { return get_or_create(device.index, false); }
cudaStream_t comm_stream(int device) { return get_or_create(device, true); }

void synchronize(Device device) {
  check_device("synchronize", device);
  DeviceGuard guard(device);
  ACCEL_CUDA_CHECK(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

}  // namespace accel::cuda
