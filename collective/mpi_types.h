// accel's dtypes and reduce ops as MPI datatypes and ops, shared by the mpi backend and the raw-MPI
// baseline of `accel bench`, so that both reduce f16/bf16 with the same user functions.
#pragma once

#include <mpi.h>

#include <array>

#include "collective/reduce_op.h"
#include "tensor/dtype.h"

namespace accel {

// f16 and bf16 travel as opaque 2-byte units that only accel's user ops read (widen to f32, combine,
// round back once); every other dtype maps to MPI's own type and op. Needs MPI initialised.
class MpiTypes {
 public:
  // owner names the caller in error messages ("MpiCommunicator", "bench (raw-mpi)").
  explicit MpiTypes(const char* owner);
  ~MpiTypes();
  MpiTypes(const MpiTypes&) = delete;
  MpiTypes& operator=(const MpiTypes&) = delete;

  MPI_Datatype datatype(DType dtype) const;
  // avg maps to MPI_SUM: MPI has no average, the caller divides by the rank count.
  MPI_Op op(DType dtype, ReduceOp reduce) const;

 private:
  void release();

  const char* owner_;
  MPI_Datatype half_type_ = MPI_DATATYPE_NULL;
  std::array<MPI_Op, 3> f16_ops_ = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};   // sum, max, min
  std::array<MPI_Op, 3> bf16_ops_ = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};  // sum, max, min
};

}  // namespace accel
