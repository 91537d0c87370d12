// Environment: device choice, the backend decision and joining the other ranks.
#include "runtime/environment.h"

#include <fmt/format.h>

#include "accel_config.h"
#include "collective/ring_communicator.h"
#if ACCEL_WITH_MPI
#include "collective/mpi_world.h"
#endif
#if ACCEL_WITH_NCCL
#include "collective/nccl_communicator.h"
#endif

namespace accel {

Environment::Environment(const ProcessState& process, const EffectiveSettings& settings) : process_(process) {
  const Backend backend = settings.backend.value;
  if (backend == Backend::nccl && !ACCEL_WITH_NCCL)
    throw Error(fmt::format("Accelerator: backend nccl (from {}) is not available: this build has no NCCL; use "
                            "auto, mpi or ring",
                            settings.backend.source));
  const bool use_cpu = settings.cpu.value;
  const int gpus = use_cpu ? 0 : cuda_device_count();
  device_ = gpus > 0 ? Device::cuda(process_.local_rank % gpus) : Device::cpu();
  // Device tensors go over NCCL when asked for, or by default when every rank on the node has a GPU
  // of its own (NCCL refuses two ranks on one GPU; those share it through the mpi backend's staging).
  const bool use_nccl = backend == Backend::nccl || (backend == Backend::automatic && ACCEL_WITH_NCCL && device_.is_cuda() &&
                                              gpus >= process_.local_world_size && process_.world_size > 1);
  if (backend == Backend::nccl && !device_.is_cuda())
    throw Error(fmt::format("Accelerator: backend nccl (from {}) needs a GPU, but the device is cpu ({}); use auto, "
                            "mpi or ring",
                            settings.backend.source, use_cpu ? "cpu=true" : "no CUDA device is visible"));
  // One process with backend nccl still builds its communicators, so a one-rank run takes the NCCL path.
  if (process_.world_size > 1 || use_nccl) join(settings, use_nccl);
}

void Environment::join(const EffectiveSettings& settings, [[maybe_unused]] bool use_nccl) {
#if ACCEL_WITH_MPI
  std::shared_ptr<MpiCommunicator> mpi = join_mpi_world();
  if (mpi->size() != process_.world_size || mpi->rank() != process_.rank)
    throw Error(fmt::format("Accelerator: the {} variables say rank {} of {}, but MPI says rank {} of {}; start "
                            "the processes with mpirun or accel launch",
                            process_.launcher, process_.rank, process_.world_size, mpi->rank(), mpi->size()));
  if (settings.backend.value == Backend::ring) comm_ = std::make_shared<RingCommunicator>(mpi);
  else comm_ = mpi;  // auto and mpi: the MPI library's own collectives; device tensors are staged
  backend_ = comm_->backend();
#if ACCEL_WITH_NCCL
  if (use_nccl) {
    device_comm_ = std::make_shared<NcclCommunicator>(device_, *mpi);
    backend_ = device_comm_->backend();
  }
#endif
#else
  (void)settings;
  throw Error(fmt::format("Accelerator: launched as rank {} of {} ({} variables), but this build has no MPI, so "
                          "it cannot communicate; rebuild with Open MPI (libopenmpi-dev) or start one process",
                          process_.rank, process_.world_size, process_.launcher));
#endif
}

Communicator& Environment::comm_for(const Tensor& t) const {
  if (device_comm_ && t.device() == device_) return *device_comm_;
  if (!comm_) throw Error("Environment::comm_for: there is one process and no communicator");
  return *comm_;
}

Communicator& Environment::grads_comm() const {
  if (device_comm_ && device_.is_cuda()) return *device_comm_;
  if (!comm_) throw Error("Environment::grads_comm: there is one process and no communicator");
  return *comm_;
}

}  // namespace accel
