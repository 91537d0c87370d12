// MpiTypes: the MPI datatype and ops of each dtype, the low-precision ones created once per owner and
// freed with it.
#include "collective/mpi_types.h"

#include <fmt/format.h>

#include "collective/mpi_environment.h"
#include "kernels/error.h"

namespace accel {

namespace {

// An MPI_User_function for f16/bf16 held in an opaque datatype: widen to f32, combine, round back.
template <DType D, ReduceOp R>
void half_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_into(D, R, inout, in, *len);
}

// MPI passes a user function no context, so each (dtype, op) pair is its own instantiation.
std::array<MPI_User_function*, 3> user_functions(DType dtype, const char* owner) {
  return dispatch_floating(dtype, owner, [&]<class T>() {
    constexpr DType D = dtype_of<T>();
    return std::array<MPI_User_function*, 3>{half_reduce<D, ReduceOp::sum>, half_reduce<D, ReduceOp::max>,
                                             half_reduce<D, ReduceOp::min>};
  });
}

size_t op_index(ReduceOp reduce) { return reduce == ReduceOp::max ? 1 : reduce == ReduceOp::min ? 2 : 0; }

}  // namespace

MpiTypes::MpiTypes(const char* owner) : owner_(owner) {
  datatypes_.fill(MPI_DATATYPE_NULL);
  for (auto& ops : ops_) ops.fill(MPI_OP_NULL);
  try {
    // MPI's handles are not constant expressions in every MPI, so this table is filled at run time.
    add_builtin(DType::f64, MPI_DOUBLE);
    add_builtin(DType::f32, MPI_FLOAT);
    add_builtin(DType::i64, MPI_INT64_T);
    add_builtin(DType::i32, MPI_INT32_T);
    add_builtin(DType::boolean, MPI_C_BOOL);
    for (const DTypeTraits& t : kDTypeTraits)
      if (t.is_low_precision) add_low_precision(t.dtype);
    for (const DTypeTraits& t : kDTypeTraits)
      if (is_float8(t.dtype)) add_bytes(t.dtype);
    for (const DTypeTraits& t : kDTypeTraits)
      if (datatypes_[index(t.dtype)] == MPI_DATATYPE_NULL)
        throw Error(fmt::format("{}: dtype {} has no MPI datatype", owner_, t.name));
  } catch (...) {
    release();
    throw;
  }
}

MpiTypes::~MpiTypes() { release(); }

// MPI's type must hold exactly what accel stores, or counts and buffers would disagree.
void MpiTypes::add_builtin(DType dtype, MPI_Datatype type) {
  int size = 0;
  const int rc = MPI_Type_size(type, &size);
  if (rc != MPI_SUCCESS) throw Error(fmt::format("{}: {}", owner_, mpi_error_text("MPI_Type_size", rc)));
  if (static_cast<size_t>(size) != dtype_size(dtype))
    throw Error(fmt::format("{}: MPI's type for {} has {} bytes but {} has {}", owner_, dtype_name(dtype), size,
                            dtype_name(dtype), dtype_size(dtype)));
  datatypes_[index(dtype)] = type;
  // bool: sum and max are logical or, min is logical and.
  ops_[index(dtype)] = dtype == DType::boolean ? std::array<MPI_Op, 3>{MPI_LOR, MPI_LOR, MPI_LAND}
                                               : std::array<MPI_Op, 3>{MPI_SUM, MPI_MAX, MPI_MIN};
}

void MpiTypes::add_low_precision(DType dtype) {
  auto check = [this](const char* call, int rc) {
    if (rc != MPI_SUCCESS) throw Error(fmt::format("{}: {}", owner_, mpi_error_text(call, rc)));
  };
  MPI_Datatype& type = datatypes_[index(dtype)];
  check("MPI_Type_contiguous", MPI_Type_contiguous(static_cast<int>(dtype_size(dtype)), MPI_BYTE, &type));
  created_types_.push_back(type);
  check("MPI_Type_commit", MPI_Type_commit(&type));
  created_types_.back() = type;  // commit may hand back a new handle
  const std::array<MPI_User_function*, 3> functions = user_functions(dtype, owner_);
  for (size_t i = 0; i < functions.size(); ++i) {
    check("MPI_Op_create", MPI_Op_create(functions[i], /*commute=*/1, &ops_[index(dtype)][i]));
    created_ops_.push_back(ops_[index(dtype)][i]);
  }
}

// The fp8 dtypes move as opaque bytes and have no reduction ops: the communicators reject reducing them.
void MpiTypes::add_bytes(DType dtype) {
  MPI_Datatype& type = datatypes_[index(dtype)];
  int rc = MPI_Type_contiguous(static_cast<int>(dtype_size(dtype)), MPI_BYTE, &type);
  if (rc != MPI_SUCCESS) throw Error(fmt::format("{}: {}", owner_, mpi_error_text("MPI_Type_contiguous", rc)));
  created_types_.push_back(type);
  rc = MPI_Type_commit(&type);
  if (rc != MPI_SUCCESS) throw Error(fmt::format("{}: {}", owner_, mpi_error_text("MPI_Type_commit", rc)));
  created_types_.back() = type;
}

size_t MpiTypes::index(DType dtype) const {
  if (!is_known(dtype)) throw_unsupported_dtype(owner_, dtype, "a known dtype");
  return static_cast<size_t>(dtype);
}

// Failures cannot be reported from here (a destructor or an unwinding constructor) and are ignored;
// after MPI_Finalize nothing may be freed at all.
void MpiTypes::release() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Op& op : created_ops_)
    if (op != MPI_OP_NULL) MPI_Op_free(&op);
  for (MPI_Datatype& type : created_types_)
    if (type != MPI_DATATYPE_NULL) MPI_Type_free(&type);
  created_ops_.clear();
  created_types_.clear();
}

MPI_Datatype MpiTypes::datatype(DType dtype) const { return datatypes_[index(dtype)]; }

MPI_Op MpiTypes::op(DType dtype, ReduceOp reduce) const {
  const MPI_Op op = ops_[index(dtype)][op_index(reduce)];
  if (op == MPI_OP_NULL)
    throw Error(fmt::format("{}: {} has no {} reduction; reduce in f32", owner_, dtype_name(dtype), reduce_op_name(reduce)));
  return op;
}

}  // namespace accel
