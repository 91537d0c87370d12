// accel's dtypes and reduce ops as MPI datatypes and ops, shared by the mpi backend and the raw-MPI
// baseline of `accel bench`, so that both reduce f16/bf16 with the same user functions.
#pragma once

#include <mpi.h>

#include <array>
#include <vector>

#include "collective/reduce_op.h"
#include "tensor/dtype.h"

namespace accel {

// The low-precision dtypes (f16, bf16) travel as opaque units of their size that only accel's user ops
// read (widen to f32, combine, round back once); the fp8 dtypes travel as bytes with no op; every other
// dtype maps to MPI's own type and op. Both
// maps are tables indexed by DType value, filled once from kDTypeTraits. Needs MPI initialised.
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
  void add_builtin(DType dtype, MPI_Datatype type);
  void add_low_precision(DType dtype);
  void add_bytes(DType dtype);
  size_t index(DType dtype) const;  // throws for a value no dtype has
  void release();

  const char* owner_;
  std::array<MPI_Datatype, kDTypeCount> datatypes_;
  std::array<std::array<MPI_Op, 3>, kDTypeCount> ops_;  // per dtype: sum (and avg), max, min
  // What this object created and must free: the opaque types and user ops of the low-precision dtypes.
  std::vector<MPI_Datatype> created_types_;
  std::vector<MPI_Op> created_ops_;
};

}  // namespace accel
