// Inputs and exact expected outputs of the benchmarked collectives, computed per period of 1021
// elements and compared element by element.
#include "bench/lib/bench_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

namespace accel::bench {

namespace {

constexpr int64_t kPeriod = 1021;

template <class T>
constexpr bool is_half = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// An exact integer as T (every value used here is exact in every dtype; check_exact guards that).
template <class T>
T as(int64_t v) {
  if constexpr (is_half<T>) return T(static_cast<float>(v));
  else return static_cast<T>(v);
}

// sum / ranks rounded as divide_by rounds it: halves divide in f32 and round once.
template <class T>
T divided(int64_t sum, int ranks) {
  if constexpr (is_half<T>) return T(static_cast<float>(sum) / static_cast<float>(ranks));
  else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(sum) / static_cast<T>(ranks);
  else return static_cast<T>(sum / ranks);  // integers truncate toward zero
}

template <class T>
bool same(T got, T want) {
  if constexpr (is_half<T>) return static_cast<float>(got) == static_cast<float>(want);
  else return got == want;  // NaN (poison) is never equal
}

// One period of rank r's inputs.
template <class T>
std::vector<T> input_row(int rank) {
  std::vector<T> row(kPeriod);
  for (int64_t i = 0; i < kPeriod; ++i) row[static_cast<size_t>(i)] = as<T>(input_value(rank, i));
  return row;
}

// One period of the reduction over all ranks, in exact integer arithmetic, then rounded once.
template <class T>
std::vector<T> reduced_row(ReduceOp op, int ranks) {
  std::vector<T> row(kPeriod);
  for (int64_t i = 0; i < kPeriod; ++i) {
    int64_t acc = input_value(0, i);
    for (int r = 1; r < ranks; ++r) {
      const int64_t v = input_value(r, i);
      acc = op == ReduceOp::max ? std::max(acc, v) : op == ReduceOp::min ? std::min(acc, v) : acc + v;
    }
    row[static_cast<size_t>(i)] = op == ReduceOp::avg ? divided<T>(acc, ranks) : as<T>(acc);
  }
  return row;
}

// Elements of p[0, n) that differ from row[(first + k) % kPeriod].
template <class T>
int64_t wrong_against(const T* p, int64_t n, const std::vector<T>& row, int64_t first) {
  int64_t wrong = 0;
  int64_t j = first % kPeriod;
  for (int64_t k = 0; k < n; ++k) {
    if (!same(p[k], row[static_cast<size_t>(j)])) ++wrong;
    if (++j == kPeriod) j = 0;
  }
  return wrong;
}

template <class T>
void fill_row(T* p, int64_t n, const std::vector<T>& row) {
  int64_t j = 0;
  for (int64_t k = 0; k < n; ++k) {
    p[k] = row[static_cast<size_t>(j)];
    if (++j == kPeriod) j = 0;
  }
}

void require_host(const char* fn, const Tensor& t) {
  if (!t.defined() || !t.device().is_cpu() || (t.numel() != 0 && !t.is_contiguous()))
    throw Error(fmt::format("{}: expected a defined, contiguous CPU tensor, got {}", fn,
                            t.defined() ? t.str() : "an undefined tensor"));
}

void require_benchmarked(const char* fn, DType dtype) {
  if (dtype == DType::boolean)
    throw Error(fmt::format("{}: {} is not benchmarked; expected f64, f32, f16, bf16, i64 or i32", fn,
                            dtype_name(dtype)));
}

template <class F>
decltype(auto) dispatch_benchmarked(const char* fn, DType dtype, F&& f) {
  require_benchmarked(fn, dtype);
  return dispatch_numeric(dtype, fn, std::forward<F>(f));
}

}  // namespace

int input_value(int rank, int64_t i) {
  // Shift by rank, then scramble by multiplying modulo the prime period, then fold to [-2, 2].
  const int64_t shifted = (i + 61 * static_cast<int64_t>(rank)) % kPeriod;
  return static_cast<int>(shifted * 7 % kPeriod % 5) - 2;
}

void check_exact(DType dtype, int ranks) {
  require_benchmarked("bench", dtype);
  // Integers are exact up to 2^(mantissa bits + 1).
  const int64_t limit = dtype == DType::bf16 ? 256 : dtype == DType::f16 ? 2048 : dtype == DType::f32 ? (1 << 24)
                                                                                                     : INT32_MAX;
  if (2 * static_cast<int64_t>(ranks) > limit)
    throw Error(fmt::format("bench: sums of {} ranks' inputs (up to {}) are not exact in {}, which holds integers "
                            "exactly up to {}; use at most {} ranks for {}",
                            ranks, 2 * static_cast<int64_t>(ranks), dtype_name(dtype), limit, limit / 2,
                            dtype_name(dtype)));
}

void fill_input(const CheckCase& c, const Tensor& t) {
  require_host("fill_input", t);
  if (c.kind == CollectiveKind::broadcast && c.rank != c.root) return poison(t);
  const int source = c.kind == CollectiveKind::broadcast ? c.root : c.rank;
  dispatch_benchmarked("fill_input", t.dtype(), [&]<class T>() {
    fill_row(static_cast<T*>(t.data_ptr()), t.numel(), input_row<T>(source));
  });
}

void poison(const Tensor& t) {
  require_host("poison", t);
  dispatch_benchmarked("poison", t.dtype(), [&]<class T>() {
    T bad;
    if constexpr (is_half<T>) bad = T(std::numeric_limits<float>::quiet_NaN());
    else if constexpr (std::is_floating_point_v<T>) bad = std::numeric_limits<T>::quiet_NaN();
    else bad = std::numeric_limits<T>::min();  // below -2 * ranks for any rank count
    std::fill_n(static_cast<T*>(t.data_ptr()), t.numel(), bad);
  });
}

int64_t count_wrong(const CheckCase& c, const Tensor& result) {
  require_host("count_wrong", result);
  if (c.ranks < 1 || c.rank < 0 || c.rank >= c.ranks || c.root < 0 || c.root >= c.ranks)
    throw Error(fmt::format("count_wrong: rank {} (root {}) of {} ranks; expected 0 <= rank, root < ranks", c.rank,
                            c.root, c.ranks));
  if (result.dtype() != c.dtype)
    throw Error(fmt::format("count_wrong: result is {} but the case is {}", dtype_name(result.dtype()),
                            dtype_name(c.dtype)));
  const int64_t n = result.numel();
  return dispatch_benchmarked("count_wrong", c.dtype, [&]<class T>() -> int64_t {
    const T* p = static_cast<const T*>(result.data_ptr());
    switch (c.kind) {
      case CollectiveKind::all_reduce: return wrong_against(p, n, reduced_row<T>(c.op, c.ranks), 0);
      case CollectiveKind::reduce_scatter:
        // This rank's part is elements [rank * n, (rank + 1) * n) of the reduction.
        return wrong_against(p, n, reduced_row<T>(c.op, c.ranks), c.rank * n);
      case CollectiveKind::broadcast: return wrong_against(p, n, input_row<T>(c.root), 0);
      case CollectiveKind::all_gather: {
        if (n % c.ranks != 0)
          throw Error(fmt::format("count_wrong: an all-gather result of {} elements is not {} equal parts", n,
                                  c.ranks));
        const int64_t part = n / c.ranks;
        int64_t wrong = 0;
        for (int r = 0; r < c.ranks; ++r) wrong += wrong_against(p + r * part, part, input_row<T>(r), 0);
        return wrong;
      }
    }
    return n;
  });
}

}  // namespace accel::bench
