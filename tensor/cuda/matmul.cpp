// CUDA matmul: one cublasLtMatmul per coalesced batch run, on the compute stream, with the device's
// workspace. Descriptors are built per call (cheap next to any GEMM worth a GPU) and the algorithm
// comes from cuBLASLt's heuristic, told the operands' true alignment. In deterministic mode the
// heuristic may only offer algorithms that sum each dot product in one sequence (no split-K).
#include "tensor/cuda/matmul.h"

#include <cublasLt.h>
#include <fmt/format.h>

#include <atomic>
#include <climits>
#include <cstdint>

#include "kernels/cuda_check.h"
#include "tensor/cpu/loop.h"
#include "tensor/cuda/blas.h"
#include "tensor/cuda/cublaslt_descriptors.h"
#include "tensor/cuda/device.h"
#include "tensor/cuda/elementwise.h"
#include "tensor/cuda/gemm_plan.h"
#include "tensor/cuda/stream.h"
#include "tensor/deterministic.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"

namespace accel::cuda {

namespace {

std::atomic<int64_t> classic_calls{0};

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
    if ((t.is_floating && !is_float8(t.dtype)) != has_gemm_types(t.dtype)) return false;
  return true;
}(), "kGemmTypes needs a row for each floating dtype but fp8 (its GEMM is tensor/cuda/fp8_gemm) and none other");

const GemmTypes& gemm_types(DType dtype) {
  for (const GemmTypes& t : kGemmTypes)
    if (t.dtype == dtype) return t;
  throw_unsupported_dtype("matmul", dtype, "a floating dtype (f64, f32, f16, bf16)");
}

std::string describe(const Tensor& out, const Tensor& a, const Tensor& b) {
  return fmt::format("{} {} x {} -> {}", dtype_name(out.dtype()), shape_str(a.shape()), shape_str(b.shape()),
                     shape_str(out.shape()));
}

// The batch dims of out = a @ b, coalesced into as few strided batches as the strides allow: each
// call of for_each_run gets one strided batch of `count` products; the runs before it are looped here.
struct BatchRuns {
  cpu::LoopLayout<3> layout;  // operand 0 is out, 1 is a, 2 is b
  int32_t count = 1;          // products per strided batch (the innermost coalesced dim)
  int64_t stride_out = 0, stride_a = 0, stride_b = 0;
  int lead = 0;                // coalesced dims looped over here
  int64_t lead_count = 1;

  // Calls run(d, a, b) with the byte pointers of each strided batch.
  template <class Run>
  void for_each_run(char* out, const char* a, const char* b, int64_t elsize, Run&& run) const {
    for (int64_t i = 0; i < lead_count; ++i) {
      int64_t off_out = 0, off_a = 0, off_b = 0, rest = i;
      for (int d = lead - 1; d >= 0; --d) {
        const int64_t c = rest % layout.shape[d];
        rest /= layout.shape[d];
        off_out += c * layout.strides[0][d];
        off_a += c * layout.strides[1][d];
        off_b += c * layout.strides[2][d];
      }
      run(out + off_out * elsize, a + off_a * elsize, b + off_b * elsize);
    }
  }
};

BatchRuns plan_batches(const char* op, const Tensor& out, const Tensor& a, const Tensor& b) {
  const int64_t nd = out.dim();
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  std::array<Strides, 3> batch_strides;
  batch_strides[0] = Strides(out.strides().begin(), out.strides().begin() + (nd - 2));
  batch_strides[1] = Strides(a.strides().begin(), a.strides().begin() + (nd - 2));
  batch_strides[2] = Strides(b.strides().begin(), b.strides().begin() + (nd - 2));
  BatchRuns runs;
  runs.layout = cpu::coalesce<3>(batch, batch_strides);
  const int64_t inner_count = runs.layout.shape.back();
  if (inner_count > INT_MAX)
    throw Error(fmt::format("{}: {} batches exceed cuBLASLt's limit of {}: {}", op, inner_count, INT_MAX,
                            describe(out, a, b)));
  runs.count = static_cast<int32_t>(inner_count);
  runs.stride_out = runs.layout.strides[0].back();
  runs.stride_a = runs.layout.strides[1].back();
  runs.stride_b = runs.layout.strides[2].back();
  runs.lead = static_cast<int>(runs.layout.shape.size()) - 1;
  for (int d = 0; d < runs.lead; ++d) runs.lead_count *= runs.layout.shape[d];
  return runs;
}

// The operands of one product, as cuBLAS sees them: its A is our b and its B is our a (gemm_plan.h).
struct GemmProblem {
  const Tensor& out;
  const Tensor& a;
  const Tensor& b;
  const Tensor* bias;
  int64_t m, n, k;
  GemmOperand pa, pb;
  GemmTypes types;
  BatchRuns runs;
  cublasOperation_t trans_a() const { return pb.transpose ? CUBLAS_OP_T : CUBLAS_OP_N; }
  cublasOperation_t trans_b() const { return pa.transpose ? CUBLAS_OP_T : CUBLAS_OP_N; }
};

// The cuBLASLt descriptors of a problem: the op with its bias epilogue, the three layouts, and the
// preference that tells the heuristic the workspace and every pointer's true alignment.
void describe_to_cublaslt(const GemmProblem& p, uint64_t workspace_bytes, LtDescriptors& desc) {
  const GemmTypes& types = p.types;
  const uint64_t elsize = dtype_size(p.out.dtype());
  // Every pointer a call may get: the base plus any multiple of the batch strides.
  auto alignment = [&](const Tensor& t, int operand) {
    uint64_t strides_bytes = 0;
    for (int64_t s : p.runs.layout.strides[operand]) strides_bytes |= static_cast<uint64_t>(s) * elsize;
    return gemm_alignment({reinterpret_cast<uint64_t>(t.data_ptr()), strides_bytes});
  };
  ACCEL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc.op, types.compute, types.scale), "cublasLtMatmulDescCreate");
  set_attr(desc.op, CUBLASLT_MATMUL_DESC_TRANSA, p.trans_a(), "transa");
  set_attr(desc.op, CUBLASLT_MATMUL_DESC_TRANSB, p.trans_b(), "transb");
  if (p.bias != nullptr) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    const void* bias_ptr = p.bias->data_ptr();
    set_attr(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue, "epilogue");
    set_attr(desc.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_ptr, "bias pointer");
  }
  const BatchRuns& r = p.runs;
  desc.a = make_layout(types.data, p.pb.stored_rows, p.pb.stored_cols, p.pb.ld, r.count, r.stride_b);
  desc.b = make_layout(types.data, p.pa.stored_rows, p.pa.stored_cols, p.pa.ld, r.count, r.stride_a);
  desc.d = make_layout(types.data, p.n, p.m, p.n, r.count, r.stride_out);
  ACCEL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&desc.pref), "cublasLtMatmulPreferenceCreate");
  set_attr(desc.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace_bytes, "workspace bytes");
  set_attr(desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment(p.b, 2), "alignment of A");
  set_attr(desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment(p.a, 1), "alignment of B");
  set_attr(desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment(p.out, 0), "alignment of C");
  set_attr(desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment(p.out, 0), "alignment of D");
  if (deterministic_mode()) {
    // Split-K reductions are ordered, but how many splits the heuristic picks depends on the GPU's
    // SM count; without them the grouping of a dot product depends on the algorithm's tile alone.
    const uint32_t no_split = CUBLASLT_REDUCTION_SCHEME_NONE;
    set_attr(desc.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, no_split, "reduction scheme mask");
  }
}

// cuBLASLt first. If it has no algorithm for this layout, or turns the first call down, the classic
// cuBLAS GEMM takes over: it accepts any layout the plan produces (odd leading dimensions of 16-bit
// types, stride-0 batches), and the bias then goes on in a second pass.
void run_gemm(const GemmProblem& p) {
  const int device = p.out.device().index;
  const BlasWorkspace workspace = blas_workspace(device);
  LtDescriptors desc;
  describe_to_cublaslt(p, workspace.bytes, desc);
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const bool f64 = p.out.dtype() == DType::f64;
  const void* alpha = f64 ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f);
  const void* beta = f64 ? static_cast<const void*>(&zero_d) : static_cast<const void*>(&zero_f);
  const cudaStream_t stream = compute_stream(p.out.device());
  const BatchRuns& r = p.runs;
  const cublasHandle_t classic = blas_handle(device);
  auto run_classic = [&](void* d_ptr, const void* a_ptr, const void* b_ptr) {
    classic_calls.fetch_add(1, std::memory_order_relaxed);
    ACCEL_CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(classic, p.trans_a(), p.trans_b(), p.n, p.m, p.k, alpha, b_ptr,
                                                     p.types.data, p.pb.ld, r.stride_b, a_ptr, p.types.data, p.pa.ld,
                                                     r.stride_a, beta, d_ptr, p.types.data, p.n, r.stride_out, r.count,
                                                     p.types.compute, CUBLAS_GEMM_DEFAULT),
                       "cublasGemmStridedBatchedEx({})", describe(p.out, p.a, p.b));
  };
  auto declined = [](cublasStatus_t s) { return s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE; };

  const cublasLtHandle_t handle = blaslt_handle(device);
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, desc.op, desc.a, desc.b, desc.d, desc.d,
                                                               desc.pref, 1, &heuristic, &found);
  if (status != CUBLAS_STATUS_SUCCESS && !declined(status))
    throw_cublas_error(status, fmt::format("cublasLtMatmulAlgoGetHeuristic({})", describe(p.out, p.a, p.b)), device);
  bool use_lt = status == CUBLAS_STATUS_SUCCESS && found > 0;
  bool first = true;
  r.for_each_run(static_cast<char*>(p.out.data_ptr()), static_cast<const char*>(p.a.data_ptr()),
                 static_cast<const char*>(p.b.data_ptr()), static_cast<int64_t>(dtype_size(p.out.dtype())),
                 [&](void* d_ptr, const void* a_ptr, const void* b_ptr) {
                   if (use_lt) {
                     const cublasStatus_t s =
                         cublasLtMatmul(handle, desc.op, alpha, b_ptr, desc.a, a_ptr, desc.b, beta, d_ptr, desc.d,
                                        d_ptr, desc.d, &heuristic.algo, workspace.ptr, workspace.bytes, stream);
                     if (s == CUBLAS_STATUS_SUCCESS) {
                       first = false;
                       return;
                     }
                     if (!first || !declined(s))
                       throw_cublas_error(s, fmt::format("cublasLtMatmul({})", describe(p.out, p.a, p.b)), device);
                     use_lt = false;
                   }
                   run_classic(d_ptr, a_ptr, b_ptr);
                 });
  if (!use_lt && p.bias != nullptr) add_scaled(p.out, *p.bias, 1.0);
}

void gemm(const char* op, const Tensor& out, Tensor a, Tensor b, const Tensor* bias) {
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
  run_gemm({out, a, b, bias, m, n, k, pa, pb, gemm_types(out.dtype()), plan_batches(op, out, a, b)});
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
  // cuBLASLt's bias epilogue may assume a 16-byte aligned bias, and no preference tells it otherwise
  // (the alignment ones cover A to D only): a bias viewed into a flat buffer (ZeRO's units) at another
  // offset is copied, else the kernel faults with a misaligned address.
  Tensor bias_c = nograd::contiguous(bias);
  if (reinterpret_cast<uintptr_t>(bias_c.data_ptr()) % 16 != 0) bias_c = nograd::clone(bias_c);
  gemm("matmul_bias", out, a, b, &bias_c);
}

}  // namespace accel::cuda
