// The FP8 GEMM: one cublasLtMatmul with the operands' scale pointers, on the compute stream with the
// device's workspace, and cuBLASLt's heuristic told the true pointer alignment. cuBLAS is column-major,
// so our row-major out [M, N] is its N x M D, our b [N, K] its A (K x N, transposed) and our a [M, K]
// its B (K x M, not transposed): the "TN" layout that FP8 GEMMs on sm_89/sm_90 require.
#include "tensor/cuda/fp8_gemm.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <atomic>
#include <optional>

#include "kernels/cuda_check.h"
#include "kernels/error.h"
#include "kernels/fp8.h"
#include "tensor/cuda/blas.h"
#include "tensor/cuda/cublaslt_descriptors.h"
#include "tensor/cuda/device.h"
#include "tensor/cuda/gemm_plan.h"
#include "tensor/cuda/stream.h"
#include "tensor/deterministic.h"

namespace accel::cuda {

namespace {

std::atomic<int64_t> amax_passes{0};

cudaDataType_t fp8_cuda_type(DType dtype) { return dtype == DType::f8_e4m3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }

std::string describe(const Tensor& out, const Tensor& a, const Tensor& b) {
  return fmt::format("{} {} x {} {}^T -> {} {}", dtype_name(a.dtype()), shape_str(a.shape()), dtype_name(b.dtype()),
                     shape_str(b.shape()), dtype_name(out.dtype()), shape_str(out.shape()));
}

void check_scalar(const char* what, const Tensor& t, Device device, const std::string& shapes) {
  if (!t.defined() || t.dtype() != DType::f32 || t.numel() != 1 || t.device() != device || !t.is_contiguous())
    throw Error(fmt::format("fp8_gemm: {} must be one f32 element on {}, got {}: {}", what, device.str(),
                            t.defined() ? fmt::format("{} {} on {}", dtype_name(t.dtype()), shape_str(t.shape()),
                                                      t.device().str())
                                        : std::string("an undefined tensor"),
                            shapes));
}

// Every rule cuBLASLt's FP8 GEMM sets, checked here so a violation names the shapes instead of
// surfacing as CUBLAS_STATUS_NOT_SUPPORTED.
void check_operands(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& a_scale_inv,
                    const Tensor& b_scale_inv, const Tensor& amax) {
  for (const Tensor* t : {&out, &a, &b})
    if (!t->defined()) throw Error("fp8_gemm: got an undefined tensor");
  const std::string shapes = describe(out, a, b);
  const Device device = out.device();
  if (!device.is_cuda()) throw Error(fmt::format("fp8_gemm: expected CUDA tensors, got {}: {}", device.str(), shapes));
  for (const Tensor* t : {&a, &b})
    if (t->device() != device)
      throw Error(fmt::format("fp8_gemm: operands on {} and {}: {}", t->device().str(), device.str(), shapes));
  if (!is_float8(a.dtype()) || !is_float8(b.dtype()) || (a.dtype() == DType::f8_e5m2 && b.dtype() == DType::f8_e5m2))
    throw Error(fmt::format("fp8_gemm: operands must be f8_e4m3 x f8_e4m3, f8_e4m3 x f8_e5m2 or f8_e5m2 x f8_e4m3: {}",
                            shapes));
  if (out.dtype() != DType::f32 && out.dtype() != DType::bf16)
    throw Error(fmt::format("fp8_gemm: output dtype {}, expected f32 or bf16: {}", dtype_name(out.dtype()), shapes));
  if (out.dim() != 2 || a.dim() != 2 || b.dim() != 2 || a.size(1) != b.size(1) || out.size(0) != a.size(0) ||
      out.size(1) != b.size(0))
    throw Error(fmt::format("fp8_gemm: expected [M, K] x [N, K]^T -> [M, N], got {}", shapes));
  const auto bad = [](int64_t d) { return d <= 0 || d % 16 != 0; };
  if (bad(a.size(0)) || bad(b.size(0)) || bad(a.size(1)))
    throw Error(fmt::format("fp8_gemm: M = {}, N = {}, K = {}; cuBLASLt's FP8 GEMM needs each a positive multiple of "
                            "16: {}",
                            a.size(0), b.size(0), a.size(1), shapes));
  for (const Tensor* t : {&out, &a, &b}) {
    if (!t->is_contiguous())
      throw Error(fmt::format("fp8_gemm: operands must be contiguous (row-major, K innermost), got strides {}: {}",
                              shape_str(t->strides()), shapes));
    if (reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 != 0)
      throw Error(fmt::format("fp8_gemm: a pointer is not 16-byte aligned (a view at an odd offset?): {}", shapes));
  }
  check_scalar("a_scale_inv", a_scale_inv, device, shapes);
  check_scalar("b_scale_inv", b_scale_inv, device, shapes);
  if (amax.defined()) check_scalar("amax", amax, device, shapes);
}

// Builds the call's descriptors; with_amax asks cuBLASLt for max |D| as well.
void describe_fp8(LtDescriptors& desc, const Tensor& out, const Tensor& a, const Tensor& b, const void* a_scale,
                  const void* b_scale, void* amax, uint64_t workspace_bytes) {
  const int64_t m = a.size(0), n = b.size(0), k = a.size(1);
  const cudaDataType_t d_type = out.dtype() == DType::f32 ? CUDA_R_32F : CUDA_R_16BF;
  ACCEL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
  set_attr(desc.op, CUBLASLT_MATMUL_DESC_TRANSA, trans, "transa");
  set_attr(desc.op, CUBLASLT_MATMUL_DESC_TRANSB, no_trans, "transb");
  // cuBLAS's A is our b, its B our a.
  set_attr(desc.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, b_scale, "A scale pointer");
  set_attr(desc.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, a_scale, "B scale pointer");
  if (amax != nullptr) set_attr(desc.op, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, amax, "amax D pointer");
  desc.a = make_layout(fp8_cuda_type(b.dtype()), k, n, k);
  desc.b = make_layout(fp8_cuda_type(a.dtype()), k, m, k);
  desc.c = make_layout(d_type, n, m, n);
  desc.d = make_layout(d_type, n, m, n);
  ACCEL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&desc.pref), "cublasLtMatmulPreferenceCreate");
  set_attr(desc.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace_bytes, "workspace bytes");
  auto alignment = [](const Tensor& t) { return gemm_alignment({reinterpret_cast<uint64_t>(t.data_ptr())}); };
  set_attr(desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment(b), "alignment of A");
  set_attr(desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment(a), "alignment of B");
  set_attr(desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment(out), "alignment of C");
  set_attr(desc.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment(out), "alignment of D");
  if (deterministic_mode()) {  // as tensor/cuda/matmul.cpp: no split-K, whose split count follows the SM count
    const uint32_t no_split = CUBLASLT_REDUCTION_SCHEME_NONE;
    set_attr(desc.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, no_split, "reduction scheme mask");
  }
}

bool declined(cublasStatus_t s) { return s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE; }

// Describes the call into desc and asks the heuristic for its best algorithm: false where cuBLASLt
// declines the combination (as it may for the amax of some output types), an Error for other failures.
bool pick_algorithm(LtDescriptors& desc, cublasLtMatmulHeuristicResult_t& heuristic, const Tensor& out, const Tensor& a,
                    const Tensor& b, const Tensor& a_scale_inv, const Tensor& b_scale_inv, void* amax,
                    uint64_t workspace_bytes) {
  describe_fp8(desc, out, a, b, a_scale_inv.data_ptr(), b_scale_inv.data_ptr(), amax, workspace_bytes);
  int found = 0;
  const int device = out.device().index;
  const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(blaslt_handle(device), desc.op, desc.a, desc.b, desc.c,
                                                          desc.d, desc.pref, 1, &heuristic, &found);
  if (s != CUBLAS_STATUS_SUCCESS && !declined(s))
    throw_cublas_error(s, fmt::format("cublasLtMatmulAlgoGetHeuristic({})", describe(out, a, b)), device);
  return s == CUBLAS_STATUS_SUCCESS && found > 0;
}

}  // namespace

bool fp8_gemm_supported(Device device) {
  if (!device.is_cuda() || device.index < 0 || device.index >= device_count()) return false;
  // Two attribute reads, not cudaGetDeviceProperties: this runs on every fp8::linear call.
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device.index) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device.index) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return major > 8 || (major == 8 && minor >= 9);
}

void check_fp8_gemm_device(const char* op, Device device) {
  check_device(op, device);
  if (fp8_gemm_supported(device)) return;
  const DeviceProperties p = device_properties(device.index);
  throw Error(fmt::format("{}: {} is {} (sm_{}{}); FP8 GEMMs need sm_89 or newer (Ada, Hopper)", op, device.str(),
                          p.name, p.major, p.minor));
}

void fp8_gemm(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& a_scale_inv,
              const Tensor& b_scale_inv, const Tensor& amax, bool accumulate) {
  check_operands(out, a, b, a_scale_inv, b_scale_inv, amax);
  const Device device = out.device();
  check_fp8_gemm_device("fp8_gemm", device);
  const DeviceGuard guard(device);
  const cudaStream_t stream = compute_stream(device);
  const cublasLtHandle_t handle = blaslt_handle(device.index);
  const BlasWorkspace workspace = blas_workspace(device.index);
  void* amax_ptr = amax.defined() ? amax.data_ptr() : nullptr;
  if (amax_ptr != nullptr) ACCEL_CUDA_CHECK(cudaMemsetAsync(amax_ptr, 0, sizeof(float), stream), "cudaMemsetAsync(amax)");

  // One try: the heuristic's algorithm, then the call; nullopt where the heuristic has none.
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  auto attempt = [&](void* amax_out) -> std::optional<cublasStatus_t> {
    LtDescriptors desc;
    cublasLtMatmulHeuristicResult_t heuristic{};
    if (!pick_algorithm(desc, heuristic, out, a, b, a_scale_inv, b_scale_inv, amax_out, workspace.bytes))
      return std::nullopt;
    return cublasLtMatmul(handle, desc.op, &alpha, b.data_ptr(), desc.a, a.data_ptr(), desc.b, &beta, out.data_ptr(),
                          desc.c, out.data_ptr(), desc.d, &heuristic.algo, workspace.ptr, workspace.bytes, stream);
  };
  // With the amax first; where cuBLASLt declines computing it for this output type, without it.
  bool lt_amax = amax_ptr != nullptr;
  std::optional<cublasStatus_t> status = attempt(lt_amax ? amax_ptr : nullptr);
  if (lt_amax && (!status || declined(*status))) {
    lt_amax = false;
    status = attempt(nullptr);
  }
  if (!status)
    throw Error(fmt::format("fp8_gemm: cuBLASLt has no FP8 algorithm for {} on {}", describe(out, a, b), device.str()));
  if (*status != CUBLAS_STATUS_SUCCESS)
    throw_cublas_error(*status, fmt::format("cublasLtMatmul({})", describe(out, a, b)), device.index);
  if (amax_ptr != nullptr && !lt_amax) {
    amax_passes.fetch_add(1, std::memory_order_relaxed);
    kernels::launch_fp8_quantize(DType::f8_e4m3, out.dtype(), nullptr, out.data_ptr(), out.numel(), 1.0f,
                                 static_cast<float*>(amax_ptr), stream);
  }
}

void fp8_quantize(const Tensor& out, const Tensor& in, float scale, const Tensor& amax) {
  if (!in.defined() || !amax.defined()) throw Error("fp8_quantize: got an undefined input or amax");
  const Device device = in.device();
  if (!device.is_cuda()) throw Error(fmt::format("fp8_quantize: expected a CUDA tensor, got {}", device.str()));
  if (out.defined() && (!is_float8(out.dtype()) || out.shape() != in.shape() || out.device() != device ||
                        !out.is_contiguous()))
    throw Error(fmt::format("fp8_quantize: out must be a contiguous fp8 {} on {}, got {} {} on {}", shape_str(in.shape()),
                            device.str(), dtype_name(out.dtype()), shape_str(out.shape()), out.device().str()));
  if (!in.is_contiguous())
    throw Error(fmt::format("fp8_quantize: the input must be contiguous, got strides {}", shape_str(in.strides())));
  if (amax.dtype() != DType::f32 || amax.numel() != 1 || amax.device() != device)
    throw Error(fmt::format("fp8_quantize: amax must be one f32 element on {}, got {} {} on {}", device.str(),
                            dtype_name(amax.dtype()), shape_str(amax.shape()), amax.device().str()));
  const DeviceGuard guard(device);
  const cudaStream_t stream = compute_stream(device);
  ACCEL_CUDA_CHECK(cudaMemsetAsync(amax.data_ptr(), 0, sizeof(float), stream), "cudaMemsetAsync(amax)");
  kernels::launch_fp8_quantize(out.defined() ? out.dtype() : DType::f8_e4m3, in.dtype(),
                               out.defined() ? out.data_ptr() : nullptr, in.data_ptr(), in.numel(), scale,
                               static_cast<float*>(amax.data_ptr()), stream);
}

int64_t fp8_gemm_amax_passes() { return amax_passes.load(std::memory_order_relaxed); }

}  // namespace accel::cuda
