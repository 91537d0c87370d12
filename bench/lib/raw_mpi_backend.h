// RawMpiBackend: the baseline column, the blocking MPI call itself (MPI_Allreduce, MPI_Allgather,
// MPI_Reduce_scatter_block, MPI_Bcast) on the same buffers as accel's backends, with no accel code
// between the caller and MPI.
#pragma once

#include <mpi.h>

#include <memory>

#include "bench/lib/bench_backend.h"
#include "collective/mpi_types.h"

namespace accel::bench {

// f16 and bf16 go through the same definitions accel's mpi backend uses: a 2-byte contiguous
// datatype and commutative user-defined ops that widen to f32, combine and round back (reduce_into).
// avg is MPI_SUM followed by the division on every rank, as in accel (MPI has no average).
class RawMpiBackend final : public BenchBackend {
 public:
  // Duplicates comm (collective), so the baseline's messages never mix with other traffic.
  explicit RawMpiBackend(MPI_Comm comm = MPI_COMM_WORLD);
  ~RawMpiBackend() override;
  RawMpiBackend(const RawMpiBackend&) = delete;
  RawMpiBackend& operator=(const RawMpiBackend&) = delete;

  std::string name() const override { return "raw-mpi"; }
  std::string baseline() const override { return ""; }
  Device device() const override { return Device::cpu(); }
  void run(const BenchCall& call) override;
  Tensor result(const BenchCall& call) const override;

 private:
  MPI_Datatype datatype(DType dtype) const;
  MPI_Op op(DType dtype, ReduceOp reduce) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::unique_ptr<MpiTypes> types_;  // freed before comm_
};

}  // namespace accel::bench
