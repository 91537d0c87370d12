// NcclCommunicator: the NCCL backend, for CUDA tensors on this rank's one device. Operations run on the
// device's communication stream, ordered after the compute stream's work by events; Work::wait() makes
// the compute stream wait for the operation, so no host synchronisation is needed per operation.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>

#include "collective/communicator.h"
#include "tensor/device.h"

namespace accel {

// The ncclComm_t, its device, stream and lock; shared with the Work handles (nccl_communicator.cpp).
struct NcclCommState;

// The NCCL version the loaded library reports, encoded as NCCL_VERSION_CODE is (2.28.9 is 22809).
int nccl_version();
// "2.28.9", or the error text when the library cannot say.
std::string nccl_version_string();

class NcclCommunicator final : public Communicator {
 public:
  // Collective over bootstrap: rank 0 creates the NCCL unique id and broadcasts it through bootstrap
  // (any CPU-capable backend, usually an MpiCommunicator); then every rank joins with bootstrap's rank
  // and size. Each rank passes its own CUDA device; NCCL refuses two ranks on one device (use the mpi
  // backend to share a GPU in tests).
  NcclCommunicator(Device device, Communicator& bootstrap);
  // Waits for this communicator's queued operations, then frees the NCCL communicator.
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "nccl"; }
  // A new NCCL communicator over the same ranks (a split with one color), on the same device and stream.
  std::unique_ptr<Communicator> create_dup() override;
  Device device() const override { return device_; }

 protected:
  // send/recv: NCCL has no tags; messages between two ranks match in the order they were started.
  // recv cannot check the sender's element count (the caller's contract, as with every collective).
  Work start_all_reduce(const Tensor& in, const Tensor& out, ReduceOp op, bool in_place) override;
  Work start_broadcast(const Tensor& tensor, int root) override;
  Work start_all_gather(const Tensor& in, const Tensor& out, bool in_place) override;
  Work start_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op, bool in_place) override;
  Work start_gather(const Tensor& in, const Tensor& out, int root) override;
  Work start_barrier() override;
  Work start_send(const Tensor& tensor, int dst, int tag) override;
  Work start_recv(const Tensor& tensor, int src, int tag) override;
  // ncclCommSplit, inheriting this communicator's configuration; the part has its own NCCL
  // communicator on the same device and stream.
  std::unique_ptr<Communicator> create_split(int color, int key) override;

 private:
  NcclCommunicator(std::shared_ptr<NcclCommState> state, int rank, int size);
  // ncclCommSplit for dup() and split(); op names the caller in errors.
  std::unique_ptr<Communicator> split_as(const char* op, int color, int key);
  template <class Body>
  Work launch(const char* op, std::initializer_list<const Tensor*> tensors, bool host_wait, Body&& body);

  std::shared_ptr<NcclCommState> state_;
  Device device_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace accel
