// The cuBLASLt descriptors of one GEMM call, owned together, and typed setters whose failures name the
// attribute: shared by the dense GEMMs (tensor/cuda/matmul.cpp) and the FP8 GEMM (tensor/cuda/fp8_gemm.cpp).
#pragma once

#include <cublasLt.h>
#include <fmt/format.h>

#include <cstdint>

#include "kernels/cuda_check.h"

namespace accel::cuda {

// Owns the descriptors of one call; each is destroyed if it was created.
struct LtDescriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  LtDescriptors() = default;
  LtDescriptors(const LtDescriptors&) = delete;
  LtDescriptors& operator=(const LtDescriptors&) = delete;
  ~LtDescriptors() {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

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

// A column-major rows x cols layout with leading dimension ld; batch > 1 makes it strided-batched.
inline cublasLtMatrixLayout_t make_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                                          int32_t batch = 1, int64_t batch_stride = 0) {
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

}  // namespace accel::cuda
