// CPU embedding: the forward copies rows; the backward groups positions by index with a counting
// sort, then each output row sums its own positions, so no two threads write the same row.
#include "tensor/cpu/embedding.h"

#include <cstring>
#include <vector>

#include "tensor/cpu/index_check.h"
#include "tensor/cpu/loop.h"
#include "tensor/cpu/map.h"
#include "tensor/op_time.h"

namespace accel::cpu {

void embedding(const Tensor& out, const Tensor& weight, const Tensor& indices) {
  const op_time::Scope timed(op_time::Kind::embedding);
  const int64_t rows = weight.shape()[0], dim = weight.shape()[1], n = indices.numel();
  const size_t row_bytes = static_cast<size_t>(dim) * dtype_size(weight.dtype());
  const char* src = static_cast<const char*>(weight.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  dispatch_index(indices.dtype(), "embedding", [&]<class I>() {
    const I* idx = static_cast<const I*>(indices.data_ptr());
    check_indices("embedding", idx, n, rows, weight.shape());
#pragma omp parallel for if (n * dim > kParallelGrain)
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(dst + i * row_bytes, src + static_cast<int64_t>(idx[i]) * row_bytes, row_bytes);
  });
}

void embedding_backward(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& indices) {
  const op_time::Scope timed(op_time::Kind::embedding);
  const int64_t rows = grad_weight.shape()[0], dim = grad_weight.shape()[1], n = indices.numel();
  dispatch_index(indices.dtype(), "embedding_backward", [&]<class I>() {
    const I* idx = static_cast<const I*>(indices.data_ptr());
    check_indices("embedding_backward", idx, n, rows, grad_weight.shape());
    std::vector<int64_t> start, order;
    group_by_index(idx, n, rows, start, order);

    dispatch_floating(grad_out.dtype(), "embedding_backward", [&]<class T>() {
      using C = compute_t<T>;
      const T* g = static_cast<const T*>(grad_out.data_ptr());
      T* gw = static_cast<T*>(grad_weight.data_ptr());
#pragma omp parallel if ((rows + n) * dim > kParallelGrain)
      {
        std::vector<C> acc(static_cast<size_t>(dim));
#pragma omp for schedule(dynamic, 16)
        for (int64_t k = 0; k < rows; ++k) {
          std::fill(acc.begin(), acc.end(), C(0));
          for (int64_t p = start[k]; p < start[k + 1]; ++p) {
            const T* row = g + order[p] * dim;
            for (int64_t j = 0; j < dim; ++j) acc[j] += load(row[j]);
          }
          T* o = gw + k * dim;
          for (int64_t j = 0; j < dim; ++j) o[j] = store<T>(acc[j]);
        }
      }
    });
  });
}

}  // namespace accel::cpu
