// Event: a marker in a stream that another stream or the host can wait for, and that times GPU work.
#pragma once

#include <cuda_runtime_api.h>

namespace accel::cuda {

class Event {
 public:
  // Created on the current device; timing events cost a little more to record.
  explicit Event(bool timing = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;

  // Marks the point after everything queued so far on stream (which must be on the event's device).
  void record(cudaStream_t stream);
  // Makes stream wait, on the GPU, for the recorded point; the host does not block.
  void wait(cudaStream_t stream) const;
  void synchronize() const;  // blocks the host until the recorded point is reached
  bool query() const;        // true once the recorded point is reached (or nothing was recorded)
  // Milliseconds from start to this event; both must be timing events that have completed.
  float elapsed_ms_since(const Event& start) const;

  cudaEvent_t get() const { return event_; }
  int device() const { return device_; }

 private:
  cudaEvent_t event_ = nullptr;
  int device_ = -1;
};

}  // namespace accel::cuda
