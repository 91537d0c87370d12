// The #wrong check: inputs are small integers, a correct result counts 0 wrong, and each corrupted
// element counts exactly once, for every collective, dtype, op and rank count.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "bench/lib/bench_check.h"
#include "tensor/creation.h"
#include "tensor/nograd/views.h"

using namespace accel;
using namespace accel::bench;

namespace {

constexpr DType kDTypes[] = {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i64, DType::i32};
constexpr CollectiveKind kKinds[] = {CollectiveKind::all_reduce, CollectiveKind::all_gather,
                                     CollectiveKind::reduce_scatter, CollectiveKind::broadcast};

template <class T>
constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// The expected value of output element i, worked out here from input_value alone.
template <class T>
T reference(const CheckCase& c, int64_t n, int64_t i) {
  const auto as = [](double v) {
    if constexpr (is_half_v<T>) return T(static_cast<float>(v));
    else return static_cast<T>(v);
  };
  const auto reduction = [&](int64_t j) -> T {
    int64_t sum = 0, hi = -100, lo = 100;
    for (int r = 0; r < c.ranks; ++r) {
      const int v = input_value(r, j);
      sum += v;
      hi = std::max<int64_t>(hi, v);
      lo = std::min<int64_t>(lo, v);
    }
    if (c.op == ReduceOp::max) return as(static_cast<double>(hi));
    if (c.op == ReduceOp::min) return as(static_cast<double>(lo));
    if (c.op == ReduceOp::sum) return as(static_cast<double>(sum));
    // avg: the sum divided once; halves in f32, integers truncating toward zero.
    if constexpr (is_half_v<T>) return T(static_cast<float>(sum) / static_cast<float>(c.ranks));
    else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(sum) / static_cast<T>(c.ranks);
    else return static_cast<T>(sum / c.ranks);
  };
  switch (c.kind) {
    case CollectiveKind::all_reduce: return reduction(i);
    case CollectiveKind::reduce_scatter: return reduction(c.rank * n + i);
    case CollectiveKind::broadcast: return as(input_value(c.root, i));
    case CollectiveKind::all_gather: {
      const int64_t part = n / c.ranks;
      return as(input_value(static_cast<int>(i / part), i % part));
    }
  }
  return T();
}

template <class T>
Tensor expected_output(const CheckCase& c, int64_t n) {
  Tensor t = empty({n}, c.dtype);
  for (int64_t i = 0; i < n; ++i) t.data<T>()[i] = reference<T>(c, n, i);
  return t;
}

// A value that differs from v: v + 1 (integers stay far from overflow; floats stay exact).
template <class T>
T bumped(T v) {
  if constexpr (is_half_v<T>) return T(static_cast<float>(v) + 1.0f);
  else return static_cast<T>(v + 1);
}

std::string name(const CheckCase& c, int64_t n) {
  return fmt::format("{} {} {} ranks {} rank {} n {}", collective_command(c.kind), dtype_name(c.dtype),
                     reduce_op_name(c.op), c.ranks, c.rank, n);
}

}  // namespace

TEST_CASE("input_value: integers in [-2, 2] that differ between ranks and repeat every 1021 elements") {
  int differs = 0;
  for (int64_t i = 0; i < 3000; ++i) {
    for (int r = 0; r < 5; ++r) {
      CHECK(input_value(r, i) >= -2);
      CHECK(input_value(r, i) <= 2);
      CHECK(input_value(r, i) == input_value(r, i + 1021));
    }
    if (input_value(0, i) != input_value(1, i)) ++differs;
    if (input_value(0, i) != input_value(0, i + 1)) ++differs;
  }
  // Neighbouring ranks and neighbouring elements differ most of the time, so misplaced data shows.
  CHECK(differs > 4000);
}

TEST_CASE("count_wrong: 0 on the exact result, and each corrupted element counted once") {
  for (CollectiveKind kind : kKinds) {
    for (DType dtype : kDTypes) {
      for (ReduceOp op : kAllReduceOps) {
        if (!reduces(kind) && op != ReduceOp::sum) continue;
        for (int ranks : {1, 2, 3, 4}) {
          const int rank = ranks - 1, root = ranks / 2;
          const CheckCase c{kind, dtype, op, ranks, rank, root};
          // Whole parts for all-gather; 2100 elements span more than two periods of the inputs.
          const int64_t n = kind == CollectiveKind::all_gather ? 700 * ranks : 2100;
          dispatch_numeric(dtype, "test", [&]<class T>() {
            INFO(name(c, n));
            const Tensor out = expected_output<T>(c, n);
            CHECK(count_wrong(c, out) == 0);
            T* p = out.data<T>();
            p[0] = bumped(p[0]);
            p[n / 2] = bumped(p[n / 2]);
            CHECK(count_wrong(c, out) == 2);
            p[n - 1] = bumped(p[n - 1]);
            CHECK(count_wrong(c, out) == 3);
            poison(nograd::narrow(out, 0, 10, 5));  // elements 10..14; none of them was corrupted yet
            CHECK(count_wrong(c, out) == 8);
            poison(out);
            CHECK(count_wrong(c, out) == n);
          });
        }
      }
    }
  }
}

TEST_CASE("fill_input: a rank's input row; broadcast non-roots start poisoned") {
  for (DType dtype : kDTypes) {
    dispatch_numeric(dtype, "test", [&]<class T>() {
      INFO(dtype_name(dtype));
      const Tensor t = empty({2500}, dtype);
      fill_input(CheckCase{CollectiveKind::all_reduce, dtype, ReduceOp::sum, 4, 3, 0}, t);
      for (int64_t i = 0; i < 2500; ++i) CHECK(static_cast<double>(static_cast<float>(t.data<T>()[i])) == input_value(3, i));
      // Broadcast's root holds its row, and its result is checked against that row.
      const CheckCase root{CollectiveKind::broadcast, dtype, ReduceOp::sum, 4, 1, 1};
      fill_input(root, t);
      CHECK(count_wrong(root, t) == 0);
      // A non-root's buffer is all poison until the broadcast arrives.
      const CheckCase other{CollectiveKind::broadcast, dtype, ReduceOp::sum, 4, 2, 1};
      fill_input(other, t);
      CHECK(count_wrong(other, t) == 2500);
    });
  }
}

TEST_CASE("poison: NaN for floats, the minimum for integers") {
  const Tensor f = empty({3}, DType::bf16);
  poison(f);
  CHECK(std::isnan(static_cast<float>(f.data<BFloat16>()[2])));
  const Tensor i = empty({3}, DType::i32);
  poison(i);
  CHECK(i.data<int32_t>()[0] == std::numeric_limits<int32_t>::min());
}

TEST_CASE("check_exact and bad arguments") {
  CHECK_NOTHROW(check_exact(DType::bf16, 128));
  CHECK_THROWS_WITH_AS(check_exact(DType::bf16, 129),
                       "bench: sums of 129 ranks' inputs (up to 258) are not exact in bf16, which holds integers "
                       "exactly up to 256; use at most 128 ranks for bf16",
                       Error);
  CHECK_NOTHROW(check_exact(DType::f16, 1024));
  CHECK_THROWS_AS(check_exact(DType::f16, 1025), Error);
  CHECK_NOTHROW(check_exact(DType::f32, 100000));
  CHECK_THROWS_WITH_AS(check_exact(DType::boolean, 2),
                       "bench: bool is not benchmarked; expected f64, f32, f16, bf16, i64 or i32", Error);
  const Tensor t = zeros({4}, DType::f32);
  CHECK_THROWS_WITH_AS(count_wrong(CheckCase{CollectiveKind::all_reduce, DType::f64, ReduceOp::sum, 2, 0, 0}, t),
                       "count_wrong: result is f32 but the case is f64", Error);
  CHECK_THROWS_WITH_AS(count_wrong(CheckCase{CollectiveKind::all_reduce, DType::f32, ReduceOp::sum, 2, 2, 0}, t),
                       "count_wrong: rank 2 (root 0) of 2 ranks; expected 0 <= rank, root < ranks", Error);
  CHECK_THROWS_WITH_AS(count_wrong(CheckCase{CollectiveKind::all_gather, DType::f32, ReduceOp::sum, 3, 0, 0}, t),
                       "count_wrong: an all-gather result of 4 elements is not 3 equal parts", Error);
}
