// BenchBackend: one column of an `accel bench` table. Either an accel Communicator (mpi, ring, later
// nccl) or the raw library call it is measured against (MPI_Allreduce, later ncclAllReduce).
#pragma once

#include <string>

#include "bench/lib/collective_kind.h"
#include "collective/communicator.h"

namespace accel::bench {

// The buffers of one call, as the Communicator's shape rules lay them out (collective/communicator.h):
//   all_reduce      in [count] -> out [count]; in place: in is out
//   all_gather      in [part] -> out [ranks * part]; in place: in is out's slot for this rank
//   reduce_scatter  in [ranks * part] -> out [part]; in place: out is in's slot for this rank
//   broadcast       out [count] on every rank, in place; in is out
struct BenchCall {
  CollectiveKind kind = CollectiveKind::all_reduce;
  Tensor in;
  Tensor out;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  bool in_place = false;
};

class BenchBackend {
 public:
  virtual ~BenchBackend() = default;
  // The column's name: "mpi", "ring" for accel backends, "raw-mpi" for the library called directly.
  virtual std::string name() const = 0;
  // The column this one is compared against in the footer ("" for a baseline itself).
  virtual std::string baseline() const = 0;
  // Where the buffers must live. Backends on one device share the same buffers in a run.
  virtual Device device() const = 0;
  // Runs the call once and returns when it has finished on this rank (for a device backend: when
  // the device is done), so that back-to-back calls time whole operations.
  virtual void run(const BenchCall& call) = 0;
  // Where this rank's result lies after run(call): call.out, unless the library leaves it elsewhere
  // (raw in-place MPI_Reduce_scatter_block writes it to the start of the buffer).
  virtual Tensor result(const BenchCall& call) const { return call.out; }
};

// An accel Communicator as a column: each run() is the async call and its wait(), so the time
// includes handing the operation to the backend's thread and back.
class CommunicatorBackend final : public BenchBackend {
 public:
  // comm must outlive this object; its tensors live on device. baseline names the raw column on the
  // same device.
  CommunicatorBackend(Communicator& comm, Device device, std::string baseline)
      : comm_(comm), device_(device), baseline_(std::move(baseline)) {}

  std::string name() const override { return comm_.backend(); }
  std::string baseline() const override { return baseline_; }
  Device device() const override { return device_; }
  void run(const BenchCall& call) override;

 private:
  Communicator& comm_;
  Device device_;
  std::string baseline_;
};

}  // namespace accel::bench
