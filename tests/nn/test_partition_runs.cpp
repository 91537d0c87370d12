// runs_in_full: a run of a tensor-parallel part's elements mapped to the full tensor's, checked element
// by element against split_part on a full tensor that holds each element's own index.
#include <doctest/doctest.h>

#include <set>

#include "accel.h"
#include "nn/parallel/partition.h"

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

}  // namespace

TEST_CASE("runs_in_full maps every run of a part to the full tensor's elements: rows, columns, blocks, padding") {
  check_every_run({6, 4}, {.dim = 0, .blocks = 1, .full_size = 6}, 2);    // row-parallel rows
  check_every_run({3, 6}, {.dim = 1, .blocks = 1, .full_size = 6}, 3);    // columns: a run per row
  check_every_run({6, 2}, {.dim = 0, .blocks = 3, .full_size = 6}, 2);    // fused q, k, v blocks
  check_every_run({2, 6, 2}, {.dim = 1, .blocks = 3, .full_size = 6}, 2); // blocks inside an outer dim
  check_every_run({5, 3}, {.dim = 0, .blocks = 1, .full_size = 5}, 2);    // a vocabulary padded to 6
  check_every_run({7}, {.dim = 0, .blocks = 1, .full_size = 7}, 4);       // 1-D, rank 3 mostly padding
}
