// RawMpiBackend: blocking MPI collectives on a duplicate communicator, every return code checked.
#include "runtime/bench/raw_mpi_backend.h"

#include <fmt/format.h>

#include <limits>

#include "collective/mpi_environment.h"
#include "tensor/ops/views.h"

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

// The same user function as accel's mpi backend: widen to f32, combine, round back once.
template <DType D, ReduceOp R>
void half_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_into(D, R, inout, in, *len);
}

int op_index(ReduceOp op) { return op == ReduceOp::max ? 1 : op == ReduceOp::min ? 2 : 0; }

}  // namespace

RawMpiBackend::RawMpiBackend(MPI_Comm comm) {
  check("MPI_Comm_dup", MPI_Comm_dup(comm, &comm_));
  check("MPI_Comm_set_errhandler", MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  check("MPI_Comm_rank", MPI_Comm_rank(comm_, &rank_));
  check("MPI_Comm_size", MPI_Comm_size(comm_, &size_));
  check("MPI_Type_contiguous", MPI_Type_contiguous(2, MPI_BYTE, &half_type_));
  check("MPI_Type_commit", MPI_Type_commit(&half_type_));
  const std::array<MPI_User_function*, 3> f16 = {half_reduce<DType::f16, ReduceOp::sum>,
                                                 half_reduce<DType::f16, ReduceOp::max>,
                                                 half_reduce<DType::f16, ReduceOp::min>};
  const std::array<MPI_User_function*, 3> bf16 = {half_reduce<DType::bf16, ReduceOp::sum>,
                                                  half_reduce<DType::bf16, ReduceOp::max>,
                                                  half_reduce<DType::bf16, ReduceOp::min>};
  for (size_t i = 0; i < 3; ++i) {
    check("MPI_Op_create", MPI_Op_create(f16[i], /*commute=*/1, &f16_ops_[i]));
    check("MPI_Op_create", MPI_Op_create(bf16[i], /*commute=*/1, &bf16_ops_[i]));
  }
}

RawMpiBackend::~RawMpiBackend() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // too late to free anything; nothing to report to from a destructor
  for (MPI_Op* op : {&f16_ops_[0], &f16_ops_[1], &f16_ops_[2], &bf16_ops_[0], &bf16_ops_[1], &bf16_ops_[2]})
    if (*op != MPI_OP_NULL) MPI_Op_free(op);
  if (half_type_ != MPI_DATATYPE_NULL) MPI_Type_free(&half_type_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

MPI_Datatype RawMpiBackend::datatype(DType dtype) const {
  switch (dtype) {
    case DType::f64: return MPI_DOUBLE;
    case DType::f32: return MPI_FLOAT;
    case DType::f16:
    case DType::bf16: return half_type_;
    case DType::i64: return MPI_INT64_T;
    case DType::i32: return MPI_INT32_T;
    default: break;
  }
  throw Error(fmt::format("bench (raw-mpi): {} is not benchmarked", dtype_name(dtype)));
}

MPI_Op RawMpiBackend::op(DType dtype, ReduceOp reduce) const {
  if (dtype == DType::f16) return f16_ops_[op_index(reduce)];
  if (dtype == DType::bf16) return bf16_ops_[op_index(reduce)];
  return reduce == ReduceOp::max ? MPI_MAX : reduce == ReduceOp::min ? MPI_MIN : MPI_SUM;
}

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
  if (c.kind == CollectiveKind::reduce_scatter && c.in_place) return ops::narrow(c.in, 0, 0, c.out.numel());
  return c.out;
}

}  // namespace accel::bench
