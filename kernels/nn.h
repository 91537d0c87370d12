// Launchers of the neural-network kernels (softmax, layer norm, cross-entropy, embedding backward,
// dropout and row gathers), declared in plain C++ for tensor/cuda. Operands are contiguous and
// checked by the op entry points; each launcher queues its kernels on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace accel::kernels {

// Softmax (or log-softmax) over the middle dim of [outer, size, inner]; out and in of dtype.
void launch_softmax(DType dtype, void* out, const void* in, int64_t outer, int64_t size, int64_t inner, bool is_log,
                    cudaStream_t stream);
// grad_in from grad_out and the forward's out.
void launch_softmax_backward(DType dtype, void* grad_in, const void* grad_out, const void* out, int64_t outer,
                             int64_t size, int64_t inner, bool is_log, cudaStream_t stream);

// Layer norm over rows of length dim; weight/bias may be null; mean/rstd are the stats dtype (f64
// for f64, else f32).
void launch_layer_norm(DType dtype, void* out, void* mean, void* rstd, const void* x, const void* weight,
                       const void* bias, int64_t rows, int64_t dim, double eps, cudaStream_t stream);
// dx of layer norm (weight may be null).
void launch_layer_norm_backward_input(DType dtype, void* grad_input, const void* grad_out, const void* x,
                                      const void* mean, const void* rstd, const void* weight, int64_t rows,
                                      int64_t dim, cudaStream_t stream);
// How many row chunks the weight/bias grads are summed in: each chunk's column sums land in a
// workspace of partials, which a second kernel adds up in chunk order.
int64_t layer_norm_param_chunks(int64_t rows);
// grad_weight / grad_bias (either may be null) as column sums over rows of grad_out * xhat and
// grad_out; workspace holds 2 * layer_norm_param_chunks(rows) * dim stats-dtype values.
void launch_layer_norm_backward_params(DType dtype, void* grad_weight, void* grad_bias, const void* grad_out,
                                       const void* x, const void* mean, const void* rstd, int64_t rows, int64_t dim,
                                       void* workspace, cudaStream_t stream);

// Cross-entropy of [rows, classes] logits against target (i64 or i32, checked on the host). With
// per_row_loss set, writes each row's loss there (the loss dtype: f64 for f64 logits, else f32; 0 for
// ignored rows). Then, unless reduction_out is null, reduces those to one value: their sum, divided
// by `divisor` (the counted rows for a mean, 1 for a sum; a mean of no rows is 0).
void launch_cross_entropy(DType dtype, DType target_dtype, void* per_row_loss, void* reduction_out,
                          const void* logits, const void* target, int64_t rows, int64_t classes, int64_t ignore_index,
                          int64_t divisor, cudaStream_t stream);
// d loss / d logits. grad_loss holds one value per row (per_row) or a single one; divisor as above.
void launch_cross_entropy_backward(DType dtype, DType target_dtype, void* grad_logits, const void* grad_loss,
                                   bool per_row, const void* logits, const void* target, int64_t rows,
                                   int64_t classes, int64_t ignore_index, int64_t divisor, cudaStream_t stream);

// out[(o, i, :)] = src[(o, index[i], :)] for rows of row_bytes bytes: src is [outer, size, row], out
// [outer, n, row]; index (i64 or i32) is checked on the host.
void launch_gather_rows(void* out, const void* src, const void* index, DType index_dtype, int64_t outer, int64_t size,
                        int64_t n, int64_t row_bytes, cudaStream_t stream);
// grad_weight row k = the sum of grad_out rows order[start[k] .. start[k + 1]) in that order.
void launch_embedding_backward(DType dtype, void* grad_weight, const void* grad_out, const int64_t* order,
                               const int64_t* start, int64_t rows, int64_t dim, cudaStream_t stream);

// Dropout of n elements: keep_mask (bool) and out = x * scale where kept, 0 elsewhere.
void launch_dropout(DType dtype, void* out, bool* keep_mask, const void* x, int64_t n, float p, double scale,
                    uint64_t seed, uint64_t offset, cudaStream_t stream);

}  // namespace accel::kernels
