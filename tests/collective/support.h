// Shared pieces of the multi-rank tests: the communicators under test, each rank's input values, and
// reference results computed here, independently of the library's reduction code.
#pragma once

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "accel.h"

namespace test {

using namespace accel;

// The communicators main() built over MPI_COMM_WORLD: the mpi backend and the ring over mpi.
std::vector<Communicator*>& backends();
Communicator& mpi();

// Element counts every collective is tested at: 0, 1, 3, ranks - 1 and 1000003 (which 2, 3 and 4 do not
// divide), without repeats.
std::vector<int64_t> test_sizes(int ranks);
// Per-rank part sizes for the collectives whose total is ranks times the part (all_gather,
// reduce_scatter, gather): the same small sizes, and about 1000003 / ranks for the large one.
std::vector<int64_t> part_sizes(int ranks);

template <class T>
constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <class T>
constexpr bool is_float_v = is_half_v<T> || std::is_floating_point_v<T>;

// A power of two at which the dtype's spacing is 2: adding 1 or 3 to it must round (to even).
template <class T>
double rounding_base() {
  if constexpr (std::is_same_v<T, Half>) return 2048.0;
  else if constexpr (std::is_same_v<T, BFloat16>) return 256.0;
  else if constexpr (std::is_same_v<T, float>) return 16777216.0;  // 2^24
  else return 9007199254740992.0;                                  // 2^53
}

// Rank r's element i. Small integers, so every partial sum is exact in every dtype and the reduction
// order cannot matter, except on floating lanes i % 8 == 7: there rank 0 holds rounding_base, rank 1
// holds 1 or 3 and all others 0, so the sum rounds exactly once in the dtype (to even), in any order.
template <class T>
T value(int rank, int64_t i) {
  if constexpr (std::is_same_v<T, bool>) {
    return (i + rank) % 3 == 0;
  } else {
    if constexpr (is_float_v<T>) {
      if (i % 8 == 7) {
        if (rank == 0) return T(static_cast<float>(rounding_base<T>()));
        if (rank == 1) return T(static_cast<float>(1 + 2 * (i / 8 % 2)));
        return T(0.0f);
      }
    }
    const int64_t v = (i * 7 + rank * 13) % 41 - 20;
    if constexpr (is_half_v<T>) return T(static_cast<float>(v));
    else return static_cast<T>(v);
  }
}

// One combination of the reference reduction, written out here rather than taken from the library:
// halves add in f32 and round to nearest even, bool sum/max is or and min is and.
template <class T>
T combine_ref(ReduceOp op, T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return op == ReduceOp::min ? (a && b) : (a || b);
  } else if constexpr (is_half_v<T>) {
    const float x = static_cast<float>(a), y = static_cast<float>(b);
    if (op == ReduceOp::max) return T(std::max(x, y));
    if (op == ReduceOp::min) return T(std::min(x, y));
    return T(x + y);
  } else {
    if (op == ReduceOp::max) return std::max(a, b);
    if (op == ReduceOp::min) return std::min(a, b);
    return static_cast<T>(a + b);
  }
}

// The reduction over all ranks of element i, in rank order; avg divides the sum once, in f32 for halves.
template <class T>
T reduce_ref(ReduceOp op, int ranks, int64_t i) {
  T acc = value<T>(0, i);
  for (int r = 1; r < ranks; ++r) acc = combine_ref(op, acc, value<T>(r, i));
  if (op == ReduceOp::avg) {
    if constexpr (is_half_v<T>) return T(static_cast<float>(acc) / static_cast<float>(ranks));
    else if constexpr (!std::is_same_v<T, bool>) return static_cast<T>(acc / static_cast<T>(ranks));
  }
  return acc;
}

// value<T>(rank, i) and reduce_ref<T>(op, ranks, i) repeat in i with this period (lcm of 41 and 16),
// so the tests look them up in tables of one period instead of recomputing them per element.
inline constexpr int64_t kPeriod = 656;

template <class T>
struct Table {
  std::vector<T> entries;  // one period
  T operator()(int64_t i) const { return entries[static_cast<size_t>(i % kPeriod)]; }
};

// value<T>(rank, i) as a table.
template <class T>
Table<T> inputs(int rank) {
  Table<T> table;
  for (int64_t i = 0; i < kPeriod; ++i) table.entries.push_back(value<T>(rank, i));
  return table;
}

// reduce_ref<T>(op, ranks, i) as a table.
template <class T>
Table<T> reduced(ReduceOp op, int ranks) {
  Table<T> table;
  for (int64_t i = 0; i < kPeriod; ++i) table.entries.push_back(reduce_ref<T>(op, ranks, i));
  return table;
}

// A new tensor of shape whose element i (row-major) is f(i).
template <class T, class F>
Tensor filled(const Shape& shape, F f) {
  Tensor t = empty(shape, dtype_of<T>());
  T* p = t.data<T>();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) p[i] = f(i);
  return t;
}

// Fills t with values that differ from want(i) at every i, so that an output the backend never wrote
// cannot pass for a right one: -99 lies outside every result the tests expect; bool takes !want(i).
template <class T, class F>
void poison(const Tensor& t, F want) {
  T* p = t.data<T>();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) p[i] = !want(i);
    else if constexpr (is_half_v<T>) p[i] = T(-99.0f);
    else p[i] = static_cast<T>(-99);
  }
}

template <class T>
double as_double(T v) {
  if constexpr (is_half_v<T>) return static_cast<float>(v);
  else return static_cast<double>(v);
}

// "" when element i of t equals expected(i) for all i, else the first difference and how many differ.
template <class T, class F>
std::string mismatch(const Tensor& t, F expected) {
  const T* p = t.data<T>();
  const int64_t n = t.numel();
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < n; ++i) {
    const T want = expected(i);
    if (!(as_double(p[i]) == as_double(want))) {
      if (bad++ == 0) first = i;
    }
  }
  if (bad == 0) return "";
  return fmt::format("rank {}: {} of {} elements differ; first at {}: got {}, expected {}", mpi().rank(), bad,
                     t.numel(), first, as_double(p[first]), as_double(expected(first)));
}

// The message of the accel::Error that f throws, or "no error" if it returns; for messages that
// depend on the rank count (CHECK_THROWS_WITH_AS takes a fixed string).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// Sums that say who took part (tests of split and DeviceMesh): world rank r contributes 10^r, so the
// sum over a group of at most 18 ranks names exactly its members.
int64_t power_of_ten(int rank);
// The sum over these world ranks of 10^rank: what an all_reduce over exactly them gives.
int64_t sum_over(const std::vector<int>& world_ranks);
// value all-reduced (summed) over comm, as one i64.
int64_t all_reduced(Communicator& comm, int64_t value);
// The world ranks of comm's members, in the order of their ranks in comm (an all_gather).
std::vector<int> members(Communicator& comm);

// Names one case of a test loop, for INFO.
std::string where(const Communicator& comm, DType dtype, int64_t n, const char* what = "");

}  // namespace test
