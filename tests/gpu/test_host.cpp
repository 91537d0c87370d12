// The host side of the CUDA backend, which needs no GPU: how launches are laid out, how GEMM
// operands map onto cuBLAS, the reduction and row-kernel plans, the multi-tensor chunks, error
// messages, `accel env`, the FP8 GEMM's argument checks, and what happens without a device.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <vector>

#include "accel.h"
#include "kernels/cuda_check.h"
#include "kernels/multi_tensor.h"
#include "kernels/reduce.h"
#include "kernels/row_plan.h"
#include "runtime/cli/env_report.h"
#include "tensor/cuda/device.h"
#include "tensor/cuda/fp8_gemm.h"
#include "tensor/cuda/gemm_plan.h"
#include "tensor/cuda/launch.h"
#include "tensor/nograd/copy.h"

using namespace accel;

namespace {

// The launches for_each_launch makes over fake (never dereferenced) operand addresses.
template <int N>
std::vector<kernels::StridedArgs<N>> launches(const Shape& shape, const std::array<Strides, N>& strides,
                                              std::array<uintptr_t, N> base, std::array<size_t, N> elsize) {
  std::array<char*, N> data;
  for (int k = 0; k < N; ++k) data[k] = reinterpret_cast<char*>(base[k]);
  std::vector<kernels::StridedArgs<N>> out;
  cuda::for_each_launch<N>(shape, strides, data, elsize, [&](const kernels::StridedArgs<N>& a) { out.push_back(a); });
  return out;
}

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace

TEST_CASE("launch layout: contiguous operands coalesce to one dense dim") {
  const auto l = launches<3>({4, 5, 6}, {Strides{30, 6, 1}, Strides{30, 6, 1}, Strides{30, 6, 1}}, {4096, 8192, 16384},
                             {4, 4, 4});
  REQUIRE(l.size() == 1);
  CHECK(l[0].dense);
  CHECK(l[0].ndim == 1);
  CHECK(l[0].numel == 120);
  CHECK(l[0].sizes[0] == 120);
}

TEST_CASE("launch layout: a broadcast scalar stays dense; a broadcast row does not") {
  const auto scalar = launches<3>({100, 7}, {Strides{7, 1}, Strides{7, 1}, Strides{0, 0}}, {256, 512, 1000}, {4, 4, 4});
  REQUIRE(scalar.size() == 1);
  CHECK(scalar[0].dense);
  CHECK(scalar[0].strides[2][0] == 0);
  const auto row = launches<3>({100, 7}, {Strides{7, 1}, Strides{7, 1}, Strides{0, 1}}, {256, 512, 1024}, {4, 4, 4});
  REQUIRE(row.size() == 1);
  CHECK_FALSE(row[0].dense);
  CHECK(row[0].ndim == 2);
  CHECK(row[0].strides[2][0] == 0);
  CHECK(row[0].strides[2][1] == 1);
}

TEST_CASE("launch layout: misaligned or transposed operands take the strided kernel") {
  const auto misaligned = launches<2>({1000}, {Strides{1}, Strides{1}}, {256, 260}, {4, 4});
  REQUIRE(misaligned.size() == 1);
  CHECK_FALSE(misaligned[0].dense);
  CHECK(misaligned[0].ndim == 1);
  const auto transposed = launches<2>({30, 40}, {Strides{40, 1}, Strides{1, 30}}, {256, 8192}, {4, 4});
  REQUIRE(transposed.size() == 1);
  CHECK_FALSE(transposed[0].dense);
  CHECK(transposed[0].ndim == 2);
  CHECK(transposed[0].strides[1][0] == 1);
  CHECK(transposed[0].strides[1][1] == 30);
  // A single element is dense whatever its strides.
  const auto one = launches<2>({1, 1}, {Strides{5, 3}, Strides{0, 0}}, {7, 9}, {4, 4});
  REQUIRE(one.size() == 1);
  CHECK(one[0].dense);
  CHECK(one[0].numel == 1);
}

TEST_CASE("launch layout: more than eight dims are walked on the host, one launch per leading index") {
  const Shape shape(10, 2);  // ten dims of size 2, none mergeable for the transposed input
  Strides out_strides(10), in_strides(10);
  for (int d = 0; d < 10; ++d) {
    out_strides[d] = int64_t{1} << (9 - d);
    in_strides[d] = int64_t{1} << d;
  }
  const auto l = launches<2>(shape, {out_strides, in_strides}, {0, 1 << 20}, {4, 2});
  REQUIRE(l.size() == 4);  // the two leading dims
  for (const auto& a : l) {
    CHECK(a.ndim == kernels::kMaxDims);
    CHECK(a.numel == 256);
  }
  // Launch i starts at leading coordinates (i / 2, i % 2).
  CHECK(addr(l[3].data[0]) == 4 * (512 + 256));
  CHECK(addr(l[3].data[1]) == (1 << 20) + 2 * (1 + 2));
  CHECK(addr(l[1].data[0]) == 4 * 256);
}

TEST_CASE("launch layout: strided layouts past 2^31 elements are cut into launches the kernel can index") {
  const int64_t rows = 3, cols = int64_t{1} << 30;  // 3 * 2^30 elements, the input transposed
  const auto l = launches<2>({rows, cols}, {Strides{cols, 1}, Strides{1, rows}}, {0, 0}, {1, 1});
  REQUIRE(l.size() == 2);  // rows 0-1 (2^31 elements), then row 2
  CHECK(l[0].numel == kernels::kMaxStridedElements);
  CHECK(l[1].numel == cols);
  CHECK(addr(l[1].data[0]) == 2 * static_cast<uint64_t>(cols));
  CHECK(addr(l[1].data[1]) == 2);
  const auto dense = launches<2>({rows * cols}, {Strides{1}, Strides{1}}, {0, 0}, {1, 1});
  REQUIRE(dense.size() == 1);  // the dense kernel indexes in 64 bits
  CHECK(dense[0].dense);
}

TEST_CASE("gemm plan: row-major and transposed operands are read in place") {
  const cuda::GemmOperand row = cuda::plan_gemm_operand(64, 32, 32, 1);
  CHECK_FALSE(row.needs_copy);
  CHECK_FALSE(row.transpose);
  CHECK(row.stored_rows == 32);
  CHECK(row.stored_cols == 64);
  CHECK(row.ld == 32);
  const cuda::GemmOperand padded = cuda::plan_gemm_operand(64, 32, 40, 1);  // a column slice of a wider matrix
  CHECK(padded.ld == 40);
  const cuda::GemmOperand col = cuda::plan_gemm_operand(64, 32, 1, 64);  // a transposed view
  CHECK(col.transpose);
  CHECK(col.stored_rows == 64);
  CHECK(col.stored_cols == 32);
  CHECK(col.ld == 64);
  CHECK(cuda::plan_gemm_operand(64, 32, 64, 2).needs_copy);   // no unit stride
  CHECK(cuda::plan_gemm_operand(64, 32, 0, 1).needs_copy);    // rows that overlap (a broadcast row)
  // Vectors: strides of size-1 dims do not matter, and ld is still at least 1.
  const cuda::GemmOperand vec = cuda::plan_gemm_operand(1, 7, 999, 1);
  CHECK_FALSE(vec.needs_copy);
  CHECK(vec.ld == 7);
  const cuda::GemmOperand column = cuda::plan_gemm_operand(7, 1, 1, 0);
  CHECK_FALSE(column.needs_copy);
  CHECK(column.ld >= 1);
}

TEST_CASE("gemm plan: the alignment cuBLASLt may assume") {
  CHECK(cuda::gemm_alignment({0}) == 256);
  CHECK(cuda::gemm_alignment({4096, 1024}) == 256);
  CHECK(cuda::gemm_alignment({4096 + 2}) == 2);
  CHECK(cuda::gemm_alignment({4096, 48}) == 16);
}

TEST_CASE("reduce plan: each shape goes where its parallelism is") {
  CHECK(kernels::plan_reduce_rows(100000, 100).warp_per_row);
  CHECK(kernels::plan_reduce_rows(1, 4096).warp_per_row);
  CHECK(kernels::plan_reduce_rows(2048, 1000000).warp_per_row);
  const kernels::ReducePlan long_row = kernels::plan_reduce_rows(1, 1000003);
  CHECK_FALSE(long_row.warp_per_row);
  CHECK(long_row.splits == (1000003 + kernels::kSplitChunk - 1) / kernels::kSplitChunk);
  CHECK(kernels::plan_reduce_rows(3, 16384).splits == 1);
  CHECK(kernels::reduce_rows_workspace_bytes(kernels::plan_reduce_rows(3, 16384), 3) == 0);
  CHECK(kernels::reduce_rows_workspace_bytes(long_row, 1) == static_cast<size_t>(long_row.splits) * 8);
}

TEST_CASE("row plan: rows that fit a group's registers are cached, with the smallest group that holds them") {
  // f32 (4 per vector), 32 values per thread: a warp holds 1024, a block of 512 holds 16384.
  kernels::RowPlan p = kernels::plan_rows(1000, 4, 32);
  CHECK(p.cached);
  CHECK(p.group == 32);
  CHECK(p.threads == kernels::kRowBlockThreads);
  CHECK(p.rows_per_block() == 8);
  CHECK(p.k == 8);  // 250 vectors over 32 lanes
  CHECK(p.blocks(37) == 5);
  p = kernels::plan_rows(4096, 4, 32);
  CHECK(p.cached);
  CHECK(p.group == 128);
  CHECK(p.threads == 128);
  CHECK(p.k == 8);
  CHECK(p.k * p.vec <= 32);
  p = kernels::plan_rows(64, 8, 32);  // bf16 attention rows: 8 vectors, one per lane
  CHECK(p.cached);
  CHECK(p.group == 32);
  CHECK(p.k == 1);
  p = kernels::plan_rows(16384, 4, 32);
  CHECK(p.cached);
  CHECK(p.group == 512);
  // Past the registers, or without whole aligned vectors: the row streams.
  p = kernels::plan_rows(20000, 4, 32);
  CHECK_FALSE(p.cached);
  CHECK(p.group == 512);
  p = kernels::plan_rows(1002, 4, 32);  // not whole vectors
  CHECK_FALSE(p.cached);
  CHECK(p.group == 32);
  p = kernels::plan_rows(4096, 0, 32);  // unaligned, or f64
  CHECK_FALSE(p.cached);
  CHECK(p.group == 128);
  CHECK(kernels::plan_rows(1, 0, 0).group == 32);
  // Every cached plan covers its row and keeps k * vec within the values a thread may hold.
  for (int64_t size = 4; size <= 16384; size += 4) {
    const kernels::RowPlan q = kernels::plan_rows(size, 4, 32);
    REQUIRE(q.cached);
    CHECK(static_cast<int64_t>(q.k) * q.group * q.vec >= size);
    CHECK(q.k * q.vec <= 32);
    CHECK(q.threads % q.group == 0);
  }
}

TEST_CASE("multi-tensor chunks: a tensor takes one block per 16384 elements") {
  CHECK(kernels::multi_tensor_blocks(0) == 0);
  CHECK(kernels::multi_tensor_blocks(1) == 1);
  CHECK(kernels::multi_tensor_blocks(kernels::kMultiTensorChunk) == 1);
  CHECK(kernels::multi_tensor_blocks(kernels::kMultiTensorChunk + 1) == 2);
}

TEST_CASE("accel env: reports the CUDA runtime, driver, cuBLAS and the GPUs, with or without a GPU") {
  const std::string report = env_report();
  INFO(report);
  CHECK(report.find("build options: cuda=yes") != std::string::npos);
  CHECK(report.find("CUDA: runtime 13.") != std::string::npos);
  CHECK(report.find("cuBLAS: 13.") != std::string::npos);
  if (cuda::device_count() == 0) CHECK(report.find("GPUs: none visible (") != std::string::npos);
  else CHECK(report.find(fmt::format("GPUs: {}\n  cuda:0: ", cuda::device_count())) != std::string::npos);
#if ACCEL_WITH_NCCL
  CHECK(report.find("NCCL: 2.") != std::string::npos);
#endif
}

TEST_CASE("errors: CUDA and cuBLAS failures name the call, the device and the error") {
  CHECK_THROWS_WITH_AS(cuda::throw_cuda_error(cudaErrorMemoryAllocation, "cudaMalloc(1073741824 bytes)", 0),
                       "cudaMalloc(1073741824 bytes) on cuda:0: out of memory (cudaErrorMemoryAllocation)", Error);
  CHECK_THROWS_WITH_AS(cuda::throw_cuda_error(cudaErrorInvalidValue, "cudaMemcpyAsync(4 bytes)", -1),
                       "cudaMemcpyAsync(4 bytes): invalid argument (cudaErrorInvalidValue)", Error);
  const std::string cublas = [] {
    try {
      cuda::throw_cublas_error(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul(f32 [2, 3] x [3, 4] -> [2, 4])", 1);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  CHECK(cublas.rfind("cublasLtMatmul(f32 [2, 3] x [3, 4] -> [2, 4]) on cuda:1: ", 0) == 0);
  CHECK(cublas.find("(CUBLAS_STATUS_NOT_SUPPORTED)") != std::string::npos);
}

TEST_CASE("devices: counting never throws, and a missing device is a clear error") {
  const int n = cuda::device_count();
  CHECK(n >= 0);
  CHECK(cuda::is_available() == (n > 0));
  const std::string expected =
      n == 0 ? fmt::format("device_allocate: cuda:0 is not available: no CUDA device is visible ({})",
                           cuda::unavailable_reason())
             : fmt::format("device_allocate: cuda:{} is not available: {} CUDA device{} visible", n, n,
                           n == 1 ? " is" : "s are");
  if (n == 0) {
    CHECK_FALSE(cuda::unavailable_reason().empty());
    CHECK_THROWS_WITH_AS(zeros({3}, DType::f32, Device::cuda(0)), expected.c_str(), Error);
  }
  CHECK_THROWS_WITH_AS(nograd::to_device(zeros({3}), Device::cuda(n)), expected.c_str(), Error);
}

TEST_CASE("fp8 GEMM host checks: CPU tensors and missing devices are named before any CUDA call") {
  CHECK_FALSE(cuda::fp8_gemm_supported(Device::cpu()));
  const Tensor a = empty({32, 48}, DType::f8_e4m3), b = empty({16, 48}, DType::f8_e4m3);
  const Tensor out = empty({32, 16}), one = ones({1});
  std::string e;
  try {
    cuda::fp8_gemm(out, a, b, one, one, Tensor());
  } catch (const Error& err) {
    e = err.what();
  }
  CHECK(e.find("fp8_gemm: expected CUDA tensors, got cpu: f8_e4m3 [32, 48] x f8_e4m3 [16, 48]^T -> f32 [32, 16]") !=
        std::string::npos);
  e.clear();
  try {
    cuda::fp8_quantize(a, empty({32, 48}), 1.0f, one);
  } catch (const Error& err) {
    e = err.what();
  }
  CHECK(e.find("fp8_quantize: expected a CUDA tensor, got cpu") != std::string::npos);
  if (!cuda::is_available()) {
    // No device: asking for the FP8 GEMM says the device is missing rather than guessing its capability.
    e.clear();
    try {
      cuda::check_fp8_gemm_device("fp8 recipe", Device::cuda(0));
    } catch (const Error& err) {
      e = err.what();
    }
    CHECK(e.find("fp8 recipe") != std::string::npos);
    CHECK(e.find("cuda:0") != std::string::npos);
  }
}
