// MpiCommunicator: the Open MPI backend. Every dtype (f16/bf16 reduced through user-defined MPI ops that
// compute in f32), in place and out of place, every MPI return code turned into accel::Error. Async
// operations run on the communicator's own threads (one for collectives, one for send/recv), so they
// overlap the caller's compute.
#pragma once

#include <mpi.h>

#include <memory>

#include "collective/communicator.h"

namespace accel {

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates comm (a collective call over comm), so this communicator's messages never mix with
  // other traffic on comm. MPI must be running with MPI_THREAD_MULTIPLE (MpiEnvironment asks for it):
  // the communicator's threads call MPI beside the caller's threads.
  explicit MpiCommunicator(MPI_Comm comm = MPI_COMM_WORLD);
  // Finishes every operation already started, then frees the duplicate and its datatype and ops.
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "mpi"; }
  std::unique_ptr<Communicator> create_dup() override;

 protected:
  Work start_all_reduce(const Tensor& in, const Tensor& out, ReduceOp op, bool in_place) override;
  Work start_broadcast(const Tensor& tensor, int root) override;
  Work start_all_gather(const Tensor& in, const Tensor& out, bool in_place) override;
  Work start_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op, bool in_place) override;
  Work start_gather(const Tensor& in, const Tensor& out, int root) override;
  Work start_barrier() override;
  Work start_send(const Tensor& tensor, int dst, int tag) override;
  Work start_recv(const Tensor& tensor, int src, int tag) override;
  // MPI_Comm_split on the collective thread; the part owns its MPI_Comm and has its own threads.
  std::unique_ptr<Communicator> create_split(int color, int key) override;

 private:
  struct Adopt {};
  MpiCommunicator(Adopt, MPI_Comm owned);  // takes ownership of a communicator made by dup or split

  class Engine;  // the duplicate communicator, its datatypes and ops, and the communication threads
  std::unique_ptr<Engine> engine_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace accel
