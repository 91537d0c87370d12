// ReduceOp's numeric values are pinned (ranks compare ops by number, and traces record them), so a
// reorder or a renumbering fails here; its names are read from one table in enum order.
#include <doctest/doctest.h>

#include <cstring>
#include <iterator>

#include "collective/reduce_op.h"

using namespace accel;

TEST_CASE("ReduceOp values are fixed") {
  CHECK(static_cast<int>(ReduceOp::sum) == 0);
  CHECK(static_cast<int>(ReduceOp::avg) == 1);
  CHECK(static_cast<int>(ReduceOp::max) == 2);
  CHECK(static_cast<int>(ReduceOp::min) == 3);
  CHECK(sizeof(ReduceOp) == 1);
}

TEST_CASE("kAllReduceOps lists every op in enum order, and each has its name") {
  const char* names[] = {"sum", "avg", "max", "min"};
  REQUIRE(std::size(kAllReduceOps) == std::size(names));
  for (size_t i = 0; i < std::size(names); ++i) {
    CHECK(static_cast<size_t>(kAllReduceOps[i]) == i);
    CHECK(std::strcmp(reduce_op_name(kAllReduceOps[i]), names[i]) == 0);
  }
  CHECK(std::strcmp(reduce_op_name(static_cast<ReduceOp>(4)), "unknown") == 0);
}
