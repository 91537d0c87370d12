// CPU index_select: one memcpy of inner elements per (outer, picked row) pair.
#include "tensor/cpu/index_select.h"

#include <cstring>

#include "tensor/cpu/index_check.h"
#include "tensor/cpu/loop.h"

namespace accel::cpu {

void index_select(const Tensor& out, const Tensor& src, const Tensor& index, int64_t dim, int64_t outer,
                  int64_t size, int64_t inner) {
  const int64_t n = index.numel();
  const int64_t row_bytes = inner * static_cast<int64_t>(dtype_size(src.dtype()));
  dispatch_index(index.dtype(), "index_select", [&]<class I>() {
    const I* idx = static_cast<const I*>(index.data_ptr());
    check_select_indices(idx, n, dim, size);
    if (row_bytes == 0) return;
    const char* from = static_cast<const char*>(src.data_ptr());
    char* to = static_cast<char*>(out.data_ptr());
    const int64_t copies = outer * n;
#pragma omp parallel for if (copies * inner > kParallelGrain)
    for (int64_t c = 0; c < copies; ++c) {
      const int64_t o = c / n, i = c % n;
      std::memcpy(to + c * row_bytes, from + (o * size + static_cast<int64_t>(idx[i])) * row_bytes,
                  static_cast<size_t>(row_bytes));
    }
  });
}

}  // namespace accel::cpu
