// RawMpiBackend: blocking MPI collectives on a duplicate communicator, every return code checked.
#include "bench/lib/raw_mpi_backend.h"

#include <fmt/format.h>

#include <limits>

#include "collective/mpi_environment.h"
#include "tensor/nograd/views.h"

namespace accel::bench {

namespace {

void check(const char* call, int rc) {
  if (rc != MPI_SUCCESS) throw Error(fmt::format("bench (raw-mpi): {}", mpi_error_text(call, rc)));
}

int mpi_count(int64_t count) {
  if (count > std::numeric_limits<int>::max())
    throw Error(fmt::format("bench (raw-mpi): {} elements exceed MPI's limit of {} per call", count,
                            std::numeric_limits<int>::max()));
  return static_cast<int>(count);
}

}  // namespace

RawMpiBackend::RawMpiBackend(MPI_Comm comm) {
  check("MPI_Comm_dup", MPI_Comm_dup(comm, &comm_));
  check("MPI_Comm_set_errhandler", MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  check("MPI_Comm_rank", MPI_Comm_rank(comm_, &rank_));
  check("MPI_Comm_size", MPI_Comm_size(comm_, &size_));
  types_ = std::make_unique<MpiTypes>("bench (raw-mpi)");
}

RawMpiBackend::~RawMpiBackend() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // too late to free anything; nothing to report to from a destructor
  types_.reset();
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

MPI_Datatype RawMpiBackend::datatype(DType dtype) const { return types_->datatype(dtype); }

MPI_Op RawMpiBackend::op(DType dtype, ReduceOp reduce) const { return types_->op(dtype, reduce); }

void RawMpiBackend::run(const BenchCall& c) {
  const DType dtype = c.out.dtype();
  const MPI_Datatype type = datatype(dtype);
  switch (c.kind) {
    case CollectiveKind::all_reduce: {
      const int count = mpi_count(c.out.numel());
      void* send = c.in_place ? MPI_IN_PLACE : c.in.data_ptr();
      check("MPI_Allreduce", MPI_Allreduce(send, c.out.data_ptr(), count, type, op(dtype, c.op), comm_));
      if (c.op == ReduceOp::avg) divide_by(dtype, c.out.data_ptr(), count, size_);
      return;
    }
    case CollectiveKind::all_gather: {
      const int count = mpi_count(c.in.numel());
      void* send = c.in_place ? MPI_IN_PLACE : c.in.data_ptr();
      check("MPI_Allgather", MPI_Allgather(send, count, type, c.out.data_ptr(), count, type, comm_));
      return;
    }
    case CollectiveKind::reduce_scatter: {
      const int count = mpi_count(c.out.numel());
      // In place, MPI reads the whole input from in and leaves this rank's part at its start.
      void* send = c.in_place ? MPI_IN_PLACE : c.in.data_ptr();
      void* recv = c.in_place ? c.in.data_ptr() : c.out.data_ptr();
      check("MPI_Reduce_scatter_block",
            MPI_Reduce_scatter_block(send, recv, count, type, op(dtype, c.op), comm_));
      if (c.op == ReduceOp::avg) divide_by(dtype, recv, count, size_);
      return;
    }
    case CollectiveKind::broadcast: {
      check("MPI_Bcast", MPI_Bcast(c.out.data_ptr(), mpi_count(c.out.numel()), type, c.root, comm_));
      return;
    }
  }
}

Tensor RawMpiBackend::result(const BenchCall& c) const {
  if (c.kind == CollectiveKind::reduce_scatter && c.in_place) return nograd::narrow(c.in, 0, 0, c.out.numel());
  return c.out;
}

}  // namespace accel::bench
