// The streams of a device: every op runs on the device's one compute stream, so ops on a device
// are ordered without host synchronisation; communication (NCCL) runs on a side stream and is
// ordered against compute with events.
#pragma once

#include <cuda_runtime_api.h>

#include "tensor/device.h"

namespace accel::cuda {

// Created on first use, non-blocking with respect to the legacy default stream, and kept for the
// life of the process. Thread-safe.
cudaStream_t compute_stream(int device);
cudaStream_t compute_stream(Device device);
cudaStream_t comm_stream(int device);

// Waits on the host until all work queued on the device has finished; throws on a failure that a
// kernel reported asynchronously.
void synchronize(Device device);

}  // namespace accel::cuda
