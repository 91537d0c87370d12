// Environment: this process's place in the job and what it trains with: the launch state, the device,
// and the communicators between the ranks. The Accelerator builds one from its settings; strategies,
// precisions and the checked collectives read it.
#pragma once

#include <memory>
#include <string>

#include "collective/communicator.h"
#include "runtime/process_state.h"
#include "runtime/settings.h"
#include "tensor/device.h"

namespace accel {

class Environment {
 public:
  // Picks the device (GPU local_rank % count unless cpu is set) and, under a launcher (world size > 1,
  // or backend nccl), joins the other ranks through MPI: collective then. Throws when the backend
  // cannot work here (nccl without NCCL or without a GPU) or when MPI disagrees with the launcher.
  Environment(const ProcessState& process, const EffectiveSettings& settings);

  const ProcessState& process() const { return process_; }
  int rank() const { return process_.rank; }
  int world_size() const { return process_.world_size; }
  Device device() const { return device_; }
  // "mpi", "ring" or "nccl" when the ranks communicate, "none" otherwise.
  const std::string& backend() const { return backend_; }

  // Host tensors and argument checks between the ranks; null with one process (unless backend nccl).
  Communicator* comm() const { return comm_.get(); }
  // The communicator for t: NCCL for tensors on this device when the backend is nccl, else comm().
  Communicator& comm_for(const Tensor& t) const;
  // What gradients of this device's parameters travel over (NCCL when available). Needs comm().
  Communicator& grads_comm() const;

 private:
  void join(const EffectiveSettings& settings, bool use_nccl);

  ProcessState process_;
  Device device_ = Device::cpu();
  std::string backend_ = "none";
  std::shared_ptr<Communicator> comm_;
  // For tensors on device_ when the backend is nccl; comm_ then carries host tensors and the checks.
  std::shared_ptr<Communicator> device_comm_;
};

}  // namespace accel
