// CUDA event wrapper with checked calls.
#include "tensor/cuda/event.h"

#include <fmt/format.h>

#include <utility>

#include "kernels/cuda_check.h"

namespace accel::cuda {

Event::Event(bool timing) {
  ACCEL_CUDA_CHECK(cudaGetDevice(&device_), "cudaGetDevice");
  ACCEL_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming),
                   "cudaEventCreateWithFlags");
}

Event::~Event() {
  if (event_ != nullptr && cudaEventDestroy(event_) != cudaSuccess) cudaGetLastError();
}

Event::Event(Event&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)), device_(std::exchange(other.device_, -1)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr && cudaEventDestroy(event_) != cudaSuccess) cudaGetLastError();
    event_ = std::exchange(other.event_, nullptr);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

void Event::record(cudaStream_t stream) { ACCEL_CUDA_CHECK(cudaEventRecord(event_, stream), "cudaEventRecord"); }

void Event::wait(cudaStream_t stream) const {
  ACCEL_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0), "cudaStreamWaitEvent");
}

void Event::synchronize() const { ACCEL_CUDA_CHECK(cudaEventSynchronize(event_), "cudaEventSynchronize"); }

bool Event::query() const {
  const cudaError_t err = cudaEventQuery(event_);
  if (err == cudaErrorNotReady) return false;
  ACCEL_CUDA_CHECK(err, "cudaEventQuery");
  return true;
}

float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0;
  ACCEL_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_), "cudaEventElapsedTime");
  return ms;
}

}  // namespace accel::cuda
