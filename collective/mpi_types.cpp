// MpiTypes: the 2-byte datatype and the f16/bf16 user ops, created once per owner and freed with it.
#include "collective/mpi_types.h"

#include <fmt/format.h>

#include "collective/mpi_environment.h"
#include "kernels/error.h"

namespace accel {

namespace {

// An MPI_User_function for f16/bf16 held in a 2-byte datatype: widen to f32, combine, round back.
template <DType D, ReduceOp R>
void half_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_into(D, R, inout, in, *len);
}

int op_index(ReduceOp reduce) { return reduce == ReduceOp::max ? 1 : reduce == ReduceOp::min ? 2 : 0; }

}  // namespace

MpiTypes::MpiTypes(const char* owner) : owner_(owner) {
  auto check = [this](const char* call, int rc) {
    if (rc != MPI_SUCCESS) {
      release();
      throw Error(fmt::format("{}: {}", owner_, mpi_error_text(call, rc)));
    }
  };
  int bool_size = 0;
  check("MPI_Type_size", MPI_Type_size(MPI_C_BOOL, &bool_size));
  if (bool_size != static_cast<int>(sizeof(bool)))
    throw Error(fmt::format("{}: MPI_C_BOOL has {} bytes but bool has {}", owner_, bool_size, sizeof(bool)));
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

MpiTypes::~MpiTypes() { release(); }

// Failures cannot be reported from here (a destructor or an unwinding constructor) and are ignored;
// after MPI_Finalize nothing may be freed at all.
void MpiTypes::release() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Op* op : {&f16_ops_[0], &f16_ops_[1], &f16_ops_[2], &bf16_ops_[0], &bf16_ops_[1], &bf16_ops_[2]})
    if (*op != MPI_OP_NULL) MPI_Op_free(op);
  if (half_type_ != MPI_DATATYPE_NULL) MPI_Type_free(&half_type_);
}

MPI_Datatype MpiTypes::datatype(DType dtype) const {
  switch (dtype) {
    case DType::f64: return MPI_DOUBLE;
    case DType::f32: return MPI_FLOAT;
    case DType::f16:
    case DType::bf16: return half_type_;
    case DType::i64: return MPI_INT64_T;
    case DType::i32: return MPI_INT32_T;
    case DType::boolean: return MPI_C_BOOL;
  }
  throw_unsupported_dtype(owner_, dtype, "a known dtype");
}

MPI_Op MpiTypes::op(DType dtype, ReduceOp reduce) const {
  const int index = op_index(reduce);
  switch (dtype) {
    case DType::f16: return f16_ops_[index];
    case DType::bf16: return bf16_ops_[index];
    case DType::boolean: return index == 2 ? MPI_LAND : MPI_LOR;
    default: return index == 1 ? MPI_MAX : index == 2 ? MPI_MIN : MPI_SUM;
  }
}

}  // namespace accel
