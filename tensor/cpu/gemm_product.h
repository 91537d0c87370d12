// The one whole-matrix product under the CPU matmul and linear: OpenBLAS's sgemm/dgemm when accel is
// built with it (meson -Dblas, faster at a training step's shapes: bench/sgemm_libraries), else
// Eigen's GEMM. Deterministic mode's fixed tiles stay on Eigen (tensor/cpu/matmul.cpp).
#pragma once

#include <Eigen/Core>
#include <limits>
#include <type_traits>

#include "accel_config.h"

#if ACCEL_WITH_BLAS
#include <cblas.h>
#endif

namespace accel::cpu {

template <class C>
using RowMajorOut = Eigen::Map<Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, Eigen::Unaligned,
                               Eigen::OuterStride<>>;

#if ACCEL_WITH_BLAS
// Whether BLAS's 32-bit sizes hold the product's.
inline bool fits_blas(Eigen::Index m, Eigen::Index n, Eigen::Index k, Eigen::Index lda, Eigen::Index ldb,
                      Eigen::Index ldc) {
  constexpr Eigen::Index kMax = std::numeric_limits<int>::max();
  return m <= kMax && n <= kMax && k <= kMax && lda <= kMax && ldb <= kMax && ldc <= kMax;
}
#endif

// out (row-major [a.rows(), b.cols()], rows ldc apart) = a @ b, or += with accumulate. a and b are
// Eigen maps over strided row- or column-major buffers of C: a column-major map is the transpose of
// a row-major matrix with the same outer stride, which is how BLAS is told to read it.
template <class C, class A, class B>
void gemm_product(C* out, Eigen::Index ldc, const A& a, const B& b, bool accumulate) {
  const Eigen::Index m = a.rows(), n = b.cols();
  if (m == 0 || n == 0) return;
#if ACCEL_WITH_BLAS
  if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>) {
    const Eigen::Index k = a.cols();
    if (k > 0 && fits_blas(m, n, k, a.outerStride(), b.outerStride(), ldc)) {
      const CBLAS_TRANSPOSE ta = A::IsRowMajor ? CblasNoTrans : CblasTrans;
      const CBLAS_TRANSPOSE tb = B::IsRowMajor ? CblasNoTrans : CblasTrans;
      const C beta = accumulate ? C(1) : C(0);
      auto i = [](Eigen::Index v) { return static_cast<int>(v); };
      if constexpr (std::is_same_v<C, float>)
        cblas_sgemm(CblasRowMajor, ta, tb, i(m), i(n), i(k), 1.0f, a.data(), i(a.outerStride()), b.data(),
                    i(b.outerStride()), beta, out, i(ldc));
      else
        cblas_dgemm(CblasRowMajor, ta, tb, i(m), i(n), i(k), 1.0, a.data(), i(a.outerStride()), b.data(),
                    i(b.outerStride()), beta, out, i(ldc));
      return;
    }
  }
#endif
  RowMajorOut<C> o(out, m, n, Eigen::OuterStride<>(ldc));
  if (accumulate) o.noalias() += a * b;
  else o.noalias() = a * b;
}

}  // namespace accel::cpu
