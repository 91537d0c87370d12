// broadcast, all_gather and gather: every backend x dtype x size, both output shapes, in place and out
// of place; each slot must hold exactly the values its rank computed.
#include "support.h"

#include "tensor/nograd/views.h"

using namespace test;

namespace {
std::vector<int> roots(int ranks) { return ranks > 1 ? std::vector<int>{0, ranks - 1} : std::vector<int>{0}; }
}  // namespace

TEST_CASE("broadcast: every rank ends with root's values, for every dtype, size and root") {
  const int ranks = mpi().size(), rank = mpi().rank();
  for (DType dtype : kAllDTypes) {
    dispatch_all(dtype, "test", [&]<class T>() {
      for (int64_t n : test_sizes(ranks)) {
        for (int root : roots(ranks)) {
          const Table<T> mine = inputs<T>(rank), roots = inputs<T>(root);
          for (Communicator* comm : backends()) {
            INFO(where(*comm, dtype, n, fmt::format("root {}", root).c_str()));
            const Tensor t = filled<T>({n}, mine);
            if (rank != root) poison<T>(t, roots);  // unlike its own values, never right by chance
            comm->broadcast(t, root);
            CHECK_MESSAGE(mismatch<T>(t, roots) == "", mismatch<T>(t, roots));
          }
        }
      }
    });
  }
}

TEST_CASE("all_gather: slot r holds rank r's part, for every dtype and size, both shapes, in place") {
  const int ranks = mpi().size(), rank = mpi().rank();
  for (DType dtype : kAllDTypes) {
    dispatch_all(dtype, "test", [&]<class T>() {
      for (int64_t n : part_sizes(ranks)) {
        std::vector<Table<T>> parts;
        for (int r = 0; r < ranks; ++r) parts.push_back(inputs<T>(r));
        const auto gathered = [&](int64_t j) { return parts[static_cast<size_t>(j / n)](j % n); };
        for (Communicator* comm : backends()) {
          INFO(where(*comm, dtype, n));
          const Tensor in = filled<T>({n}, parts[rank]);
          const Tensor concatenated = empty({ranks * n}, dtype);
          poison<T>(concatenated, gathered);
          comm->all_gather(in, concatenated);
          CHECK_MESSAGE(mismatch<T>(concatenated, gathered) == "", mismatch<T>(concatenated, gathered));
          const Tensor stacked = empty({ranks, n}, dtype);
          poison<T>(stacked, gathered);
          comm->all_gather(in, stacked);
          CHECK_MESSAGE(mismatch<T>(stacked, gathered) == "", mismatch<T>(stacked, gathered));
          // In place: this rank's part already sits in its slot of out.
          const Tensor out = empty({ranks * n}, dtype);
          poison<T>(out, gathered);
          const Tensor slot = nograd::narrow(out, 0, rank * n, n);
          T* p = slot.data<T>();
          for (int64_t i = 0; i < n; ++i) p[i] = parts[rank](i);
          comm->all_gather(slot, out);
          CHECK_MESSAGE(mismatch<T>(out, gathered) == "", mismatch<T>(out, gathered));
        }
      }
    });
  }
}

TEST_CASE("all_gather: a 2-d part gathers along dim 0 or stacks") {
  const int ranks = mpi().size(), rank = mpi().rank();
  for (Communicator* comm : backends()) {
    INFO(where(*comm, DType::i32, 6));
    const Tensor in = filled<int32_t>({2, 3}, [&](int64_t i) { return static_cast<int32_t>(rank * 100 + i); });
    const Tensor out = empty({2 * ranks, 3}, DType::i32);
    comm->all_gather(in, out);
    CHECK(mismatch<int32_t>(out, [](int64_t j) { return static_cast<int32_t>(j / 6 * 100 + j % 6); }) == "");
    const Tensor stacked = empty({ranks, 2, 3}, DType::i32);
    comm->all_gather(in, stacked);
    CHECK(mismatch<int32_t>(stacked, [](int64_t j) { return static_cast<int32_t>(j / 6 * 100 + j % 6); }) == "");
  }
}

TEST_CASE("gather: root's slot r holds rank r's part, for every dtype, size and root; others pass no out") {
  const int ranks = mpi().size(), rank = mpi().rank();
  for (DType dtype : kAllDTypes) {
    dispatch_all(dtype, "test", [&]<class T>() {
      for (int64_t n : part_sizes(ranks)) {
        std::vector<Table<T>> parts;
        for (int r = 0; r < ranks; ++r) parts.push_back(inputs<T>(r));
        const auto gathered = [&](int64_t j) { return parts[static_cast<size_t>(j / n)](j % n); };
        for (int root : roots(ranks)) {
          for (Communicator* comm : backends()) {
            INFO(where(*comm, dtype, n, fmt::format("root {}", root).c_str()));
            const Tensor in = filled<T>({n}, parts[rank]);
            const Tensor out = rank == root ? empty({ranks, n}, dtype) : Tensor();
            if (rank == root) poison<T>(out, gathered);
            comm->gather(in, out, root);
            if (rank == root) CHECK_MESSAGE(mismatch<T>(out, gathered) == "", mismatch<T>(out, gathered));
          }
        }
      }
    });
  }
}
