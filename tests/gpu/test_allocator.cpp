// The caching allocator on a GPU: reuse across repeated steps (no new cudaMalloc the second time),
// stats, splitting and merging, empty_cache, streams, and the out-of-memory message.
#include "tensor/cuda/allocator.h"
#include "tensor/cuda/event.h"
#include "tensor/cuda/matmul.h"
#include "tensor/cuda/stream.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"
#include "tests/gpu/gpu_test.h"

using namespace accel;
using namespace accel::gpu_test;

namespace {

// A small "training step" of ops of several sizes, from 4 bytes to 64 MB.
double step(const Tensor& x, const Tensor& w) {
  Tensor h = empty({x.size(0), w.size(1)}, x.dtype(), kGpu);
  cuda::matmul(h, x, w);
  h = nograd::gelu(nograd::add(h, 1.0));
  const Tensor big = nograd::mul(nograd::to_dtype(nograd::expand(nograd::sum(h, {0}, true), {4096, w.size(1)}), DType::f32), 0.5);
  return nograd::mean(nograd::add(big, nograd::to_dtype(nograd::max(h), DType::f32))).item();
}

}  // namespace

TEST_CASE("allocator: a repeated step makes no new cudaMalloc") {
  const Tensor x = random({512, 1024}, DType::bf16, kGpu, 150), w = random({1024, 4096}, DType::bf16, kGpu, 151);
  const double first = step(x, w);
  const cuda::AllocatorStats after_first = cuda::allocator_stats(kGpu);
  for (int i = 0; i < 3; ++i) CHECK(step(x, w) == doctest::Approx(first).epsilon(1e-6));
  const cuda::AllocatorStats after_more = cuda::allocator_stats(kGpu);
  CHECK(after_more.device_mallocs == after_first.device_mallocs);
  CHECK(after_more.allocations > after_first.allocations);
  CHECK(after_more.allocated_bytes == after_first.allocated_bytes);  // every temporary was given back
  CHECK(after_more.reserved_bytes == after_first.reserved_bytes);
  MESSAGE(fmt::format("after the first step: {} cudaMalloc calls, {} bytes reserved, {} allocations served",
                      after_first.device_mallocs, after_first.reserved_bytes, after_more.allocations));
}

TEST_CASE("allocator: stats follow allocation, peak and release") {
  cuda::empty_cache(kGpu);
  const cuda::AllocatorStats base = cuda::allocator_stats(kGpu);
  size_t expected_peak = base.allocated_bytes;
  {
    const Tensor a = empty({1000}, DType::f32, kGpu);          // 4000 bytes: rounds to 4096, small pool
    const Tensor b = empty({3 << 20}, DType::f32, kGpu);       // 12 MiB: a segment of its own
    const cuda::AllocatorStats s = cuda::allocator_stats(kGpu);
    CHECK(s.allocated_bytes == base.allocated_bytes + 4096 + (size_t{12} << 20));
    CHECK(s.reserved_bytes >= s.allocated_bytes);
    CHECK(s.cached_bytes == s.reserved_bytes - s.allocated_bytes);
    expected_peak = s.allocated_bytes;
  }
  cuda::AllocatorStats s = cuda::allocator_stats(kGpu);
  CHECK(s.allocated_bytes == base.allocated_bytes);
  CHECK(s.peak_allocated_bytes >= expected_peak);
  CHECK(s.cached_bytes >= (size_t{12} << 20));  // kept for reuse, not freed
  cuda::reset_peak_stats(kGpu);
  CHECK(cuda::allocator_stats(kGpu).peak_allocated_bytes == s.allocated_bytes);
  const int64_t frees = s.device_frees;
  cuda::empty_cache(kGpu);
  s = cuda::allocator_stats(kGpu);
  CHECK(s.device_frees > frees);
  CHECK(s.reserved_bytes < base.reserved_bytes + (size_t{12} << 20));
}

TEST_CASE("allocator: freed blocks merge back and the same requests get the same blocks") {
  cuda::empty_cache(kGpu);
  const int64_t mallocs = cuda::allocator_stats(kGpu).device_mallocs;
  std::vector<Tensor> blocks;
  std::vector<void*> first;
  for (int i = 0; i < 16; ++i) {
    blocks.push_back(empty({1000}, DType::f32, kGpu));  // 4 KiB each, cut from one 2 MiB segment
    first.push_back(blocks.back().data_ptr());
  }
  CHECK(cuda::allocator_stats(kGpu).device_mallocs - mallocs <= 1);
  blocks.clear();
  // The freed blocks merged into one free range, so a request for all of it fits the same segment.
  const void* merged = empty({16 * 1024}, DType::f32, kGpu).data_ptr();
  CHECK(merged == first[0]);
  std::vector<void*> second;
  for (int i = 0; i < 16; ++i) {
    blocks.push_back(empty({1000}, DType::f32, kGpu));
    second.push_back(blocks.back().data_ptr());
  }
  CHECK(second == first);
  CHECK(cuda::allocator_stats(kGpu).device_mallocs - mallocs <= 1);
  CHECK(cuda::allocation_size(1) == 512);
  CHECK(cuda::allocation_size(513) == 1024);
}

TEST_CASE("allocator: a block used on the communication stream is not reused until that stream is done") {
  // Hold the communication stream behind a long product on the compute stream.
  const Tensor a = full({8192, 8192}, 1.0, DType::f32, kGpu), b = full({8192, 8192}, 0.5, DType::f32, kGpu);
  Tensor c = empty({8192, 8192}, DType::f32, kGpu);
  cuda::matmul(c, a, b);
  cuda::Event done;
  done.record(cuda::compute_stream(0));
  done.wait(cuda::comm_stream(0));
  void* p = cuda::device_allocate(1 << 20, kGpu);
  cuda::record_stream(p, kGpu, cuda::comm_stream(0));
  cuda::device_free(p, kGpu);
  void* q = cuda::device_allocate(1 << 20, kGpu);
  CHECK(q != p);  // p waits for the communication stream, which waits for the product
  cuda::device_free(q, kGpu);
  cuda::synchronize(kGpu);
  CHECK(nograd::select(nograd::select(c, 0, 0), 0, 0).item() == 4096.0);
}

TEST_CASE("allocator: running out of memory is an Error with the sizes, and the device stays usable") {
  const size_t too_much = size_t{1} << 50;  // 1 PiB
  const std::string msg = error_of([&] { empty({static_cast<int64_t>(too_much / 4)}, DType::f32, kGpu); });
  CHECK(msg.rfind(fmt::format("cudaMalloc({} bytes) on cuda:0: out of memory (cudaErrorMemoryAllocation); a request "
                              "of {} bytes",
                              too_much, too_much),
                  0) == 0);
  CHECK(nograd::sum(ones({10}, DType::f32, kGpu)).item() == 10.0);
}
