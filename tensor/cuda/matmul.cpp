// CUDA matmul: one cublasLtMatmul per coalesced batch run, on the compute stream, with the device's
// workspace. Descriptors are built per call (cheap next to any GEMM worth a GPU) and the algorithm
// comes from cuBLASLt's heuristic, told the operands' true alignment.
#include "tensor/cuda/matmul.h"

#include <cublasLt.h>
#include <fmt/format.h>

#include <atomic>
#include <climits>

#include "kernels/cuda_check.h"
#include "tensor/cpu/loop.h"
#include "tensor/cuda/blas.h"
#include "tensor/cuda/device.h"
#include "tensor/cuda/elementwise.h"
#include "tensor/cuda/gemm_plan.h"
#include "tensor/cuda/stream.h"
#include "tensor/nograd/views.h"

namespace accel::cuda {

namespace {

std::atomic<int64_t> classic_calls{0};

// Owns the cuBLASLt descriptors of one call.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  Descriptors() = default;
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  ~Descriptors() {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

struct GemmTypes {
  DType dtype;
  cudaDataType_t data;
  cublasComputeType_t compute;
  cudaDataType_t scale;
};

// The floating dtypes; f16 and bf16 accumulate and scale in f32 (their compute dtype).
constexpr GemmTypes kGemmTypes[] = {
    {DType::f64, CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F},
    {DType::f32, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F},
    {DType::f16, CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F},
    {DType::bf16, CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F},
};

constexpr bool has_gemm_types(DType dtype) {
  for (const GemmTypes& t : kGemmTypes)
    if (t.dtype == dtype) return true;
  return false;
}
static_assert([] {
  for (const DTypeTraits& t : kDTypeTraits)
    if (t.is_floating != has_gemm_types(t.dtype)) return false;
  return true;
}(), "kGemmTypes needs a row for each floating dtype and none other");

const GemmTypes& gemm_types(DType dtype) {
  for (const GemmTypes& t : kGemmTypes)
    if (t.dtype == dtype) return t;
  throw_unsupported_dtype("matmul", dtype, "a floating dtype (f64, f32, f16, bf16)");
}

template <class T>
void set_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value, const char* name) {
  ACCEL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)),
                     "cublasLtMatmulDescSetAttribute({})", name);
}

template <class T>
void set_attr(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr, const T& value, const char* name) {
  ACCEL_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, attr, &value, sizeof(value)),
                     "cublasLtMatrixLayoutSetAttribute({})", name);
}

template <class T>
void set_attr(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const T& value,
              const char* name) {
  ACCEL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)),
                     "cublasLtMatmulPreferenceSetAttribute({})", name);
}

cublasLtMatrixLayout_t make_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int32_t batch,
                                   int64_t batch_stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  ACCEL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, static_cast<uint64_t>(rows),
                                                static_cast<uint64_t>(cols), ld),
                     "cublasLtMatrixLayoutCreate({} x {}, ld {})", rows, cols, ld);
  if (batch > 1) {
    try {
      set_attr(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, batch, "batch count");
      set_attr(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, batch_stride, "batch stride");
    } catch (...) {
      cublasLtMatrixLayoutDestroy(layout);
      throw;
    }
  }
  return layout;
}

std::string describe(const Tensor& out, const Tensor& a, const Tensor& b) {
  return fmt::format("{} {} x {} -> {}", dtype_name(out.dtype()), shape_str(a.shape()), shape_str(b.shape()),
                     shape_str(out.shape()));
}

void gemm(const char* op, const Tensor& out, Tensor a, Tensor b, const Tensor* bias) {
  const int64_t nd = out.dim();
  const int64_t m = out.size(-2), n = out.size(-1), k = a.size(-1);
  if (!out.is_contiguous())
    throw Error(fmt::format("{}: the output must be contiguous, got strides {}", op, shape_str(out.strides())));
  if (out.numel() == 0) return;
  const DeviceGuard guard(out.device());
  if (k == 0) {  // an empty sum: zeros, plus the bias
    fill(out, 0.0);
    if (bias != nullptr) add_scaled(out, *bias, 1.0);
    return;
  }

  GemmOperand pa = plan_gemm_operand(m, k, a.stride(-2), a.stride(-1));
  if (pa.needs_copy) {
    a = nograd::contiguous(a);
    pa = plan_gemm_operand(m, k, a.stride(-2), a.stride(-1));
  }
  GemmOperand pb = plan_gemm_operand(k, n, b.stride(-2), b.stride(-1));
  if (pb.needs_copy) {
    b = nograd::contiguous(b);
    pb = plan_gemm_operand(k, n, b.stride(-2), b.stride(-1));
  }

  // Batch dims: coalesce what can be one strided batch, loop over the rest here.
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  std::array<Strides, 3> batch_strides;
  batch_strides[0] = Strides(out.strides().begin(), out.strides().begin() + (nd - 2));
  batch_strides[1] = Strides(a.strides().begin(), a.strides().begin() + (nd - 2));
  batch_strides[2] = Strides(b.strides().begin(), b.strides().begin() + (nd - 2));
  const cpu::LoopLayout<3> layout = cpu::coalesce<3>(batch, batch_strides);
  const int64_t inner_count = layout.shape.back();
  if (inner_count > INT_MAX)
    throw Error(fmt::format("{}: {} batches exceed cuBLASLt's limit of {}: {}", op, inner_count, INT_MAX,
                            describe(out, a, b)));
  const int32_t count = static_cast<int32_t>(inner_count);
  const int64_t stride_out = layout.strides[0].back(), stride_a = layout.strides[1].back(),
                stride_b = layout.strides[2].back();
  const int lead = static_cast<int>(layout.shape.size()) - 1;
  int64_t lead_count = 1;
  for (int d = 0; d < lead; ++d) lead_count *= layout.shape[d];

  const GemmTypes types = gemm_types(out.dtype());
  const uint64_t elsize = dtype_size(out.dtype());
  auto address = [](const Tensor& t) { return reinterpret_cast<uint64_t>(t.data_ptr()); };
  // Every pointer a call may get: the base plus any multiple of the batch strides.
  auto alignment = [&](const Tensor& t, int k_operand) {
    uint64_t strides_bytes = 0;
    for (int64_t s : layout.strides[k_operand]) strides_bytes |= static_cast<uint64_t>(s) * elsize;
    return gemm_alignment({address(t), strides_bytes});
  };

  Descriptors desc;
  ACCEL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc.op, types.compute, types.scale), "cublasLtMatmulDescCreate");
  // cuBLAS's A is our b and its B is our a (see gemm_plan.h).
  const cublasOperation_t trans_a = pb.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t trans_b = pa.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_attr(desc.op, CUBLASLT_MATMUL_DESC_TRANSA, trans_a, "transa");
  set_attr(desc.op, CUBLASLT_MATMUL_DESC_TRANSB, trans_b, "transb");
  if (bias != nullptr) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    const void* bias_ptr = bias->data_ptr();
    set_attr(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue, "epilogue");
    set_attr(desc.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_ptr, "bias pointer");
  }
  desc.a = make_layout(types.data, pb.stored_rows, pb.stored_cols, pb.ld, count, stride_b);
  desc.b = make_layout(types.data, pa.stored_rows, pa.stored_cols, pa.ld, count, stride_a);
  desc.d = make_layout(types.data, n, m, n, count, stride_out);

  const int device = out.device().index;
  const BlasWorkspace workspace = blas_workspace(device);
  ACCEL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&desc.pref), "cublasLtMatmulPreferenceCreate");
  const uint64_t workspace_bytes = workspace.bytes;
  set_attr(desc.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace_bytes, "workspace bytes");
  set_attr(desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment(b, 2), "alignment of A");
  set_attr(desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment(a, 1), "alignment of B");
  set_attr(desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment(out, 0), "alignment of C");
  set_attr(desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment(out, 0), "alignment of D");

  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const bool f64 = out.dtype() == DType::f64;
  const void* alpha = f64 ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f);
  const void* beta = f64 ? static_cast<const void*>(&zero_d) : static_cast<const void*>(&zero_f);
  const cudaStream_t stream = compute_stream(out.device());
  char* base_out = static_cast<char*>(out.data_ptr());
  const char* base_a = static_cast<const char*>(a.data_ptr());
  const char* base_b = static_cast<const char*>(b.data_ptr());
  // Calls run(d, a, b) with the pointers of each coalesced batch run.
  auto for_each_run = [&](auto&& run) {
    for (int64_t i = 0; i < lead_count; ++i) {
      int64_t off_out = 0, off_a = 0, off_b = 0, rest = i;
      for (int d = lead - 1; d >= 0; --d) {
        const int64_t c = rest % layout.shape[d];
        rest /= layout.shape[d];
        off_out += c * layout.strides[0][d];
        off_a += c * layout.strides[1][d];
        off_b += c * layout.strides[2][d];
      }
      const auto bytes = static_cast<int64_t>(elsize);
      run(base_out + off_out * bytes, base_a + off_a * bytes, base_b + off_b * bytes);
    }
  };

  // cuBLASLt first. If it has no algorithm for this layout, or turns the first call down, the
  // classic cuBLAS GEMM takes over: it accepts any layout the plan produces (odd leading
  // dimensions of 16-bit types, stride-0 batches), and the bias then goes on in a second pass.
  const cublasHandle_t classic = blas_handle(device);
  auto run_classic = [&](void* d_ptr, const void* a_ptr, const void* b_ptr) {
    classic_calls.fetch_add(1, std::memory_order_relaxed);
    ACCEL_CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(classic, trans_a, trans_b, n, m, k, alpha, b_ptr, types.data, pb.ld,
                                                     stride_b, a_ptr, types.data, pa.ld, stride_a, beta, d_ptr,
                                                     types.data, n, stride_out, count, types.compute,
                                                     CUBLAS_GEMM_DEFAULT),
                       "cublasGemmStridedBatchedEx({})", describe(out, a, b));
  };
  auto declined = [](cublasStatus_t s) { return s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE; };

  const cublasLtHandle_t handle = blaslt_handle(device);
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, desc.op, desc.a, desc.b, desc.d, desc.d,
                                                               desc.pref, 1, &heuristic, &found);
  if (status != CUBLAS_STATUS_SUCCESS && !declined(status))
    throw_cublas_error(status, fmt::format("cublasLtMatmulAlgoGetHeuristic({})", describe(out, a, b)), device);
  bool use_lt = status == CUBLAS_STATUS_SUCCESS && found > 0;
  bool first = true;
  for_each_run([&](void* d_ptr, const void* a_ptr, const void* b_ptr) {
    if (use_lt) {
      const cublasStatus_t s = cublasLtMatmul(handle, desc.op, alpha, b_ptr, desc.a, a_ptr, desc.b, beta, d_ptr,
                                              desc.d, d_ptr, desc.d, &heuristic.algo, workspace.ptr, workspace.bytes,
                                              stream);
      if (s == CUBLAS_STATUS_SUCCESS) {
        first = false;
        return;
      }
      if (!first || !declined(s)) throw_cublas_error(s, fmt::format("cublasLtMatmul({})", describe(out, a, b)), device);
      use_lt = false;
    }
    run_classic(d_ptr, a_ptr, b_ptr);
  });
  if (!use_lt && bias != nullptr) add_scaled(out, *bias, 1.0);
}

}  // namespace

void matmul(const Tensor& out, const Tensor& a, const Tensor& b) { gemm("matmul", out, a, b, nullptr); }

int64_t classic_gemm_calls() { return classic_calls.load(std::memory_order_relaxed); }

void matmul_bias(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias) {
  for (const Tensor* t : {&out, &a, &b, &bias})
    if (!t->defined()) throw Error("matmul_bias: got an undefined tensor");
  const std::string shapes = fmt::format("{} x {} + {} -> {}", shape_str(a.shape()), shape_str(b.shape()),
                                         shape_str(bias.shape()), shape_str(out.shape()));
  for (const Tensor* t : {&a, &b, &bias})
    if (t->dtype() != out.dtype() || t->device() != out.device())
      throw Error(fmt::format("matmul_bias: every operand must be {} on {}, got {} on {}: {}", dtype_name(out.dtype()),
                              out.device().str(), dtype_name(t->dtype()), t->device().str(), shapes));
  if (!out.device().is_cuda()) throw Error(fmt::format("matmul_bias: expected CUDA tensors, got {}", out.device().str()));
  const bool ranks_ok = out.dim() >= 2 && a.dim() == out.dim() && b.dim() == out.dim() && bias.dim() == 1;
  bool shapes_ok = ranks_ok;
  for (int64_t d = 0; shapes_ok && d < out.dim() - 2; ++d) shapes_ok = a.size(d) == out.size(d) && b.size(d) == out.size(d);
  shapes_ok = shapes_ok && a.size(-2) == out.size(-2) && a.size(-1) == b.size(-2) && b.size(-1) == out.size(-1) &&
              bias.size(0) == out.size(-1);
  if (!shapes_ok)
    throw Error(fmt::format("matmul_bias: expected [..., M, K] x [..., K, N] + [N] -> [..., M, N], got {}", shapes));
  const Tensor bias_c = nograd::contiguous(bias);
  gemm("matmul_bias", out, a, b, &bias_c);
}

}  // namespace accel::cuda
