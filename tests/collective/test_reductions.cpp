// all_reduce and reduce_scatter: every backend x dtype x op x size, in place and out of place, against
// the rank-order reference (exact, including the f16/bf16 rounding).
#include "support.h"

#include <cstring>

#include "tensor/nograd/views.h"

using namespace test;

TEST_CASE("all_reduce: every dtype, op and size equals the reference, in place and out of place") {
  const int ranks = mpi().size(), rank = mpi().rank();
  for (DType dtype : kAllDTypes) {
    if (is_float8(dtype)) continue;  // fp8 is never reduced: test_errors checks the error
    dispatch_all(dtype, "test", [&]<class T>() {
      for (int64_t n : test_sizes(ranks)) {
        const Table<T> mine = inputs<T>(rank);
        const Tensor in = filled<T>({n}, mine);
        const Tensor out = empty({n}, dtype);
        for (ReduceOp op : kAllReduceOps) {
          if (dtype == DType::boolean && op == ReduceOp::avg) continue;  // an error, tested in test_errors
          const Table<T> want = reduced<T>(op, ranks);
          for (Communicator* comm : backends()) {
            INFO(where(*comm, dtype, n, reduce_op_name(op)));
            poison<T>(out, want);
            comm->all_reduce(in, out, op);
            CHECK_MESSAGE(mismatch<T>(out, want) == "", mismatch<T>(out, want));
            std::memcpy(out.data_ptr(), in.data_ptr(), in.nbytes());  // in place, on a copy of in
            comm->all_reduce(out, op);
            CHECK_MESSAGE(mismatch<T>(out, want) == "", mismatch<T>(out, want));
          }
        }
        INFO(where(mpi(), dtype, n));
        CHECK_MESSAGE(mismatch<T>(in, mine) == "", "out of place must leave in alone");
      }
    });
  }
}

TEST_CASE("all_reduce: a 2-d tensor reduces like its flat elements") {
  const int ranks = mpi().size(), rank = mpi().rank();
  for (Communicator* comm : backends()) {
    INFO(where(*comm, DType::f32, 15));
    const Tensor t = filled<float>({3, 5}, [&](int64_t i) { return value<float>(rank, i); });
    comm->all_reduce(t, ReduceOp::max);
    CHECK(t.shape() == Shape{3, 5});
    CHECK(mismatch<float>(t, [&](int64_t i) { return reduce_ref<float>(ReduceOp::max, ranks, i); }) == "");
  }
}

TEST_CASE("reduce_scatter: every dtype, op and size equals the reference, in place and out of place") {
  const int ranks = mpi().size(), rank = mpi().rank();
  for (DType dtype : kAllDTypes) {
    if (is_float8(dtype)) continue;  // fp8 is never reduced: test_errors checks the error
    dispatch_all(dtype, "test", [&]<class T>() {
      for (int64_t n : part_sizes(ranks)) {
        const Table<T> mine = inputs<T>(rank);
        const Tensor in = filled<T>({ranks, n}, mine);  // the stacked form [ranks, n]
        const Tensor out = empty({n}, dtype);
        const Tensor whole = empty({ranks * n}, dtype);  // the concatenated form [ranks * n]
        const Tensor slot = nograd::narrow(whole, 0, rank * n, n);
        for (ReduceOp op : kAllReduceOps) {
          if (dtype == DType::boolean && op == ReduceOp::avg) continue;
          // This rank receives slot `rank` of the reduction of everyone's in.
          const Table<T> all = reduced<T>(op, ranks);
          const auto want = [&](int64_t i) { return all(rank * n + i); };
          for (Communicator* comm : backends()) {
            INFO(where(*comm, dtype, n, reduce_op_name(op)));
            poison<T>(out, want);
            comm->reduce_scatter(in, out, op);
            CHECK_MESSAGE(mismatch<T>(out, want) == "", mismatch<T>(out, want));
            // In place: out is this rank's slot of in.
            std::memcpy(whole.data_ptr(), in.data_ptr(), in.nbytes());
            comm->reduce_scatter(whole, slot, op);
            CHECK_MESSAGE(mismatch<T>(slot, want) == "", mismatch<T>(slot, want));
          }
        }
        INFO(where(mpi(), dtype, n));
        CHECK_MESSAGE(mismatch<T>(in, mine) == "", "out of place must leave in alone");
      }
    });
  }
}

TEST_CASE("f16/bf16 sums round to nearest even once, and avg divides the rounded sum") {
  // On lane 7 rank 0 holds the base and rank 1 holds 1; on lane 15 rank 1 holds 3 (support.h).
  const int ranks = mpi().size(), rank = mpi().rank();
  for (Communicator* comm : backends()) {
    INFO(where(*comm, DType::f16, 16));
    const Tensor h = filled<Half>({16}, [&](int64_t i) { return value<Half>(rank, i); });
    comm->all_reduce(h, ReduceOp::avg);
    // 2048 + 1 ties to the even 2048, then / ranks is exact.
    CHECK(static_cast<float>(h.data<Half>()[7]) == 2048.0f / static_cast<float>(ranks));
    const Tensor b = filled<BFloat16>({16}, [&](int64_t i) { return value<BFloat16>(rank, i); });
    comm->all_reduce(b, ReduceOp::sum);
    // bf16 spacing at 256 is 2: 256 + 1 ties to the even 256, and 256 + 3 ties to the even 260.
    CHECK(static_cast<float>(b.data<BFloat16>()[7]) == 256.0f);
    CHECK(static_cast<float>(b.data<BFloat16>()[15]) == (ranks > 1 ? 260.0f : 256.0f));
  }
}
