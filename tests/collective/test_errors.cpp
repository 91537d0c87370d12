// Bad arguments throw accel::Error on the rank that makes the call, before anything is sent; the MPI
// environment's ownership rules; a one-rank ring.
#include "support.h"

#include "accel_config.h"
#include "tensor/nograd/views.h"

#if ACCEL_WITH_CUDA
#include "tensor/cuda/device.h"
#endif

using namespace test;

namespace {

// A tensor that claims to live on cuda:0 (its memory is host memory that nothing reads), to reach the
// device checks in a build without CUDA.
Tensor fake_cuda_tensor(int64_t n) {
  void* memory = std::malloc(static_cast<size_t>(n) * 4);
  auto storage = std::make_shared<Storage>(memory, static_cast<size_t>(n) * 4, Device::cuda(0), [](void* p) { std::free(p); });
  return Tensor::make_view(storage, {n}, {1}, 0, DType::f32);
}

}  // namespace

TEST_CASE("argument errors name the op and the values") {
  for (Communicator* comm : backends()) {
    INFO(where(*comm, DType::f32, 4, "errors"));
    const int n = comm->size(), rank = comm->rank();
    const Tensor a = zeros({4});
    CHECK_THROWS_WITH_AS(comm->all_reduce(a, zeros({4}, DType::f16)),
                         "all_reduce: out is f16 [4] but in is f32 [4]; expected the same dtype and shape", Error);
    CHECK_THROWS_WITH_AS(comm->all_reduce(a, zeros({2, 2})),
                         "all_reduce: out is f32 [2, 2] but in is f32 [4]; expected the same dtype and shape", Error);
    CHECK_THROWS_WITH_AS(comm->all_reduce(zeros({3}, DType::boolean), ReduceOp::avg),
                         "all_reduce: avg is not defined for bool (max is logical or, min is logical and)", Error);
    CHECK_THROWS_WITH_AS(comm->reduce_scatter(zeros({n}, DType::boolean), zeros({1}, DType::boolean), ReduceOp::avg),
                         "reduce_scatter: avg is not defined for bool (max is logical or, min is logical and)", Error);
    CHECK_THROWS_WITH_AS(comm->all_reduce(Tensor()), "all_reduce: in is undefined", Error);
    const Tensor wide = zeros({8});
    CHECK_THROWS_WITH_AS(comm->all_reduce(nograd::narrow(wide, 0, 0, 4), nograd::narrow(wide, 0, 2, 4)),
                         "all_reduce: in and out overlap but are not the same memory", Error);
    CHECK_THROWS_WITH_AS(comm->all_reduce(nograd::transpose(zeros({2, 3}), 0, 1)),
                         "all_reduce: in is not contiguous (shape [3, 2], strides [1, 3]); pass nograd::contiguous(in)",
                         Error);

    CHECK(error_of([&] { comm->all_gather(zeros({2}), zeros({2 * n + 1})); }) == fmt::format("all_gather: out has shape [{}], expected [{}] or [{}, 2] for {} ranks of in [2]",
                                     2 * n + 1, 2 * n, n, n));
    CHECK(error_of([&] { comm->all_gather(scalar_tensor(1.0), zeros({n, 1})); }) == fmt::format("all_gather: out has shape [{}, 1], expected [{}] for {} ranks of in []", n, n, n));
    CHECK_THROWS_WITH_AS(comm->all_gather(zeros({2}), zeros({2 * n}, DType::f64)),
                         "all_gather: out is f64 but in is f32; expected the same dtype", Error);
    const Tensor gathered = zeros({2 * n + 2});
    CHECK(error_of([&] { comm->all_gather(nograd::narrow(gathered, 0, 2 * rank + 1, 2), nograd::narrow(gathered, 0, 0, 2 * n)); }) == fmt::format("all_gather: in overlaps out but is not out's slot for rank {}", rank));

    CHECK(error_of([&] { comm->reduce_scatter(zeros({2 * n + 1}), zeros({2})); }) == fmt::format("reduce_scatter: in has shape [{}], expected [{}] or [{}, 2] for {} ranks of out [2]",
                                     2 * n + 1, 2 * n, n, n));
    CHECK_THROWS_WITH_AS(comm->reduce_scatter(zeros({2 * n}, DType::i32), zeros({2})),
                         "reduce_scatter: out is f32 but in is i32; expected the same dtype", Error);

    CHECK(error_of([&] { comm->broadcast(a, n); }) == fmt::format("broadcast: root {} out of range for {} ranks", n, n));
    CHECK(error_of([&] { comm->broadcast(a, -1); }) == fmt::format("broadcast: root -1 out of range for {} ranks", n));
    CHECK(error_of([&] { comm->gather(a, zeros({4 * n}), n); }) == fmt::format("gather: root {} out of range for {} ranks", n, n));
    if (rank == 0)
      CHECK(error_of([&] { comm->gather(a, zeros({4 * n + 1}), 0); }) == fmt::format("gather: out has shape [{}], expected [{}] or [{}, 4] for {} ranks of in [4]",
                                       4 * n + 1, 4 * n, n, n));

    CHECK(error_of([&] { comm->send(a, n, 0); }) == fmt::format("send: dst {} out of range for {} ranks", n, n));
    CHECK(error_of([&] { comm->recv(a, -1, 0); }) == fmt::format("recv: src -1 out of range for {} ranks", n));
    CHECK_THROWS_WITH_AS(comm->send(a, 0, kMaxTag + 1), "send: tag 32768 out of range [0, 32767]", Error);
    CHECK_THROWS_WITH_AS(comm->recv(a, 0, -3), "recv: tag -3 out of range [0, 32767]", Error);
  }
}

TEST_CASE("fp8 tensors move through every collective but are never reduced") {
  for (Communicator* comm : backends()) {
    INFO(where(*comm, DType::f8_e4m3, 4, "fp8"));
    const int n = comm->size();
    CHECK_THROWS_WITH_AS(comm->all_reduce(zeros({4}, DType::f8_e4m3), ReduceOp::max),
                         "all_reduce: cannot max-reduce f8_e4m3 tensors (f8 only stores: reduce in f32 and cast)", Error);
    CHECK_THROWS_WITH_AS(comm->reduce_scatter(zeros({n}, DType::f8_e5m2), zeros({1}, DType::f8_e5m2)),
                         "reduce_scatter: cannot sum-reduce f8_e5m2 tensors (f8 only stores: reduce in f32 and cast)",
                         Error);
  }
}

TEST_CASE("device tensors the backends cannot take are refused with a message naming the backend") {
  const Tensor gpu = fake_cuda_tensor(4);
  Communicator& ring = *backends().at(1);
  // The mpi backend stages device tensors through pinned host memory (tests/gpu/test_dist.cpp), so it
  // refuses them only where there is no CUDA device to stage from.
#if ACCEL_WITH_CUDA
  if (cuda::device_count() == 0) {
    const std::string missing = "cuda:0 is not available: no CUDA device is visible (" + cuda::unavailable_reason() + ")";
    CHECK_THROWS_WITH_AS(mpi().all_reduce(gpu), ("all_reduce (mpi): " + missing).c_str(), Error);
    CHECK_THROWS_WITH_AS(mpi().send(gpu, 0, 0), ("send (mpi): " + missing).c_str(), Error);
    CHECK_THROWS_WITH_AS(ring.broadcast(gpu, 0), ("broadcast (mpi): " + missing).c_str(), Error);
  }
#else
  CHECK_THROWS_WITH_AS(mpi().all_reduce(gpu), "all_reduce (mpi): tensor is on cuda:0, but accel was built without CUDA",
                       Error);
  CHECK_THROWS_WITH_AS(mpi().send(gpu, 0, 0), "send (mpi): tensor is on cuda:0, but accel was built without CUDA", Error);
  CHECK_THROWS_WITH_AS(ring.broadcast(gpu, 0), "broadcast (mpi): tensor is on cuda:0, but accel was built without CUDA",
                       Error);
#endif
  CHECK_THROWS_WITH_AS(ring.all_reduce(gpu), "all_reduce (ring): tensor is on cuda:0, but the ring backend takes CPU tensors only",
                       Error);
}

TEST_CASE("MpiEnvironment initialises only once and finalises only what it initialised") {
  {
    MpiEnvironment second;  // MPI is already up (main made the first one)
    CHECK_FALSE(second.initialised_here());
    CHECK(second.thread_level() == MPI_THREAD_MULTIPLE);
  }
  // Destroying the second one must not have finalised MPI.
  int finalized = 1;
  MPI_Finalized(&finalized);
  CHECK(finalized == 0);
  const Tensor t = from_vector<int64_t>({1});
  mpi().all_reduce(t);
  CHECK(t.data<int64_t>()[0] == mpi().size());
}

TEST_CASE("a one-rank ring over MPI_COMM_SELF: every collective is a copy") {
  RingCommunicator ring(std::make_shared<MpiCommunicator>(MPI_COMM_SELF));
  CHECK(ring.size() == 1);
  CHECK(ring.rank() == 0);
  const Tensor in = from_vector<float>({1, -2, 3});
  const Tensor out = zeros({3});
  ring.all_reduce(in, out, ReduceOp::avg);
  CHECK(out.to_vector<float>() == std::vector<float>{1, -2, 3});
  const Tensor gathered = zeros({1, 3});
  ring.all_gather(in, gathered);
  CHECK(gathered.to_vector<float>() == std::vector<float>{1, -2, 3});
  const Tensor scattered = zeros({3});
  ring.reduce_scatter(in, scattered, ReduceOp::max);
  CHECK(scattered.to_vector<float>() == std::vector<float>{1, -2, 3});
}
