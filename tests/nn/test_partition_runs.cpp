// runs_in_full: a run of a tensor-parallel part's elements mapped to the full tensor's, checked element
// by element against split_part on a full tensor that holds each element's own index; and split_part
// and rank_part of a meta tensor (DeferredInit), which must materialise to the eager part's values.
#include <doctest/doctest.h>

#include <set>

#include "accel.h"
#include "nn/parallel/partition.h"
#include "tensor/meta_tensor.h"
#include "tensor/nograd/views.h"

using namespace accel;
using nn::parallel::TensorSplit;

namespace {

// For every run [offset, offset + count) of every rank's part: the mapped runs are in order, hold
// exactly the part's non-padding elements of the run, and each maps to the full element it came from.
void check_every_run(const Shape& full_shape, const TensorSplit& split, int size) {
  const int64_t n = shape_numel(full_shape);
  std::vector<float> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = static_cast<float>(i + 1);  // 0: padding
  const Tensor full = from_vector(ids, full_shape);
  std::set<int64_t> covered;
  for (int rank = 0; rank < size; ++rank) {
    const Tensor part = nn::parallel::split_part(full, split, rank, size);
    const std::vector<float> values = contiguous(part).to_vector<float>();
    const auto m = static_cast<int64_t>(values.size());
    for (int64_t offset = 0; offset <= m; ++offset)
      for (int64_t count = 0; offset + count <= m; ++count) {
        INFO("rank ", rank, " of ", size, ", run of ", count, " at ", offset, ", part ", shape_str(part.shape()));
        int64_t mapped = 0, last = -1;
        for (const auto& run : nn::parallel::runs_in_full(part.shape(), split, rank, offset, count)) {
          CHECK(run.count > 0);
          CHECK(run.part_offset > last);
          last = run.part_offset;
          REQUIRE(run.part_offset + run.count <= count);
          for (int64_t k = 0; k < run.count; ++k) {
            const float id = values[static_cast<size_t>(offset + run.part_offset + k)];
            REQUIRE(id == static_cast<float>(run.full_offset + k + 1));
            if (count == 1) covered.insert(run.full_offset + k);
          }
          mapped += run.count;
        }
        int64_t real = 0;
        for (int64_t k = 0; k < count; ++k) real += values[static_cast<size_t>(offset + k)] != 0.0f;
        CHECK(mapped == real);
      }
  }
  CHECK(static_cast<int64_t>(covered.size()) == n);  // every full element is some rank's
}

// A tensor initialised in two steps (randn, then normal_ over a range of rows), as a layer's weight
// is: the deferred build records both, and materialising must replay them in order.
Tensor two_step_init(const Shape& shape, bool deferred_init) {
  DeferredInit deferred(deferred_init);
  Generator gen(5);
  Tensor t = randn(shape, gen);
  nn::init::normal_(nograd::narrow(t, 0, 0, 1), 3.0, 0.5, gen);
  return t;
}

std::vector<float> values_of(const Tensor& t) { return contiguous(t).to_vector<float>(); }

}  // namespace

TEST_CASE("split_part and rank_part of a meta tensor: each rank's part materialises to the eager part, "
          "bitwise, its padding zeros, and a run of it to the same run") {
  struct Case {
    Shape shape;
    TensorSplit split;
    int size;
  };
  const std::vector<Case> cases = {
      {{6, 4}, {.dim = 0, .blocks = 1, .full_size = 6}, 2},
      {{3, 6}, {.dim = 1, .blocks = 1, .full_size = 6}, 3},
      {{6, 2}, {.dim = 0, .blocks = 3, .full_size = 6}, 2},
      {{5, 3}, {.dim = 0, .blocks = 1, .full_size = 5}, 2},  // padded to 6
      {{7}, {.dim = 0, .blocks = 1, .full_size = 7}, 4},
  };
  for (const Case& c : cases) {
    const Tensor eager = two_step_init(c.shape, false), meta = two_step_init(c.shape, true);
    REQUIRE(meta.is_meta());
    std::set<uint64_t> fingerprints;
    for (int rank = 0; rank < c.size; ++rank) {
      INFO("rank ", rank, " of ", c.size, " of ", shape_str(c.shape), " along dim ", c.split.dim);
      const Tensor expected = nn::parallel::split_part(eager, c.split, rank, c.size);
      const Tensor part = nn::parallel::split_part(meta, c.split, rank, c.size);
      REQUIRE(part.is_meta());
      CHECK(part.shape() == expected.shape());
      fingerprints.insert(part.storage()->recipe()->fingerprint());
      // A run from the middle of the part, then the whole part.
      const int64_t n = part.numel(), first = n / 3, count = n - n / 3 - n / 4;
      Tensor run = zeros({count});
      materialize_run(part, first, run);
      const std::vector<float> all = values_of(expected);
      CHECK(values_of(run) == std::vector<float>(all.begin() + first, all.begin() + first + count));
      materialize_in_place(part, "part");
      CHECK(values_of(part) == all);
      if (c.split.full_size % (c.split.blocks * c.size) == 0) {
        const Tensor ranked = nn::parallel::rank_part(meta, c.split.dim, c.split.blocks, rank, c.size);
        REQUIRE(ranked.is_meta());
        materialize_in_place(ranked, "rank_part");
        CHECK(values_of(ranked) == all);
      }
    }
    CHECK(static_cast<int>(fingerprints.size()) == c.size);  // the ranks' parts are told apart
  }
}

TEST_CASE("runs_in_full maps every run of a part to the full tensor's elements: rows, columns, blocks, padding") {
  check_every_run({6, 4}, {.dim = 0, .blocks = 1, .full_size = 6}, 2);    // row-parallel rows
  check_every_run({3, 6}, {.dim = 1, .blocks = 1, .full_size = 6}, 3);    // columns: a run per row
  check_every_run({6, 2}, {.dim = 0, .blocks = 3, .full_size = 6}, 2);    // fused q, k, v blocks
  check_every_run({2, 6, 2}, {.dim = 1, .blocks = 3, .full_size = 6}, 2); // blocks inside an outer dim
  check_every_run({5, 3}, {.dim = 0, .blocks = 1, .full_size = 5}, 2);    // a vocabulary padded to 6
  check_every_run({7}, {.dim = 0, .blocks = 1, .full_size = 7}, 4);       // 1-D, rank 3 mostly padding
}
