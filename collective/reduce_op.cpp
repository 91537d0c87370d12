// Reduction math on host buffers, for every dtype and ReduceOp.
#include "collective/reduce_op.h"

#include <fmt/format.h>

#include <iterator>
#include <type_traits>

#include "kernels/error.h"

namespace accel {

namespace {

struct ReduceOpName {
  ReduceOp op;
  const char* name;
};

// One row per op, in enum order (checked below), so the value indexes it.
constexpr ReduceOpName kReduceOpNames[] = {
    {ReduceOp::sum, "sum"}, {ReduceOp::avg, "avg"}, {ReduceOp::max, "max"}, {ReduceOp::min, "min"}};

static_assert([] {
  for (size_t i = 0; i < std::size(kReduceOpNames); ++i)
    if (static_cast<size_t>(kReduceOpNames[i].op) != i) return false;
  return std::size(kReduceOpNames) == std::size(kAllReduceOps);
}(), "kReduceOpNames needs one row per ReduceOp, in enum order");

}  // namespace

const char* reduce_op_name(ReduceOp op) {
  const size_t i = static_cast<size_t>(op);
  return i < std::size(kReduceOpNames) ? kReduceOpNames[i].name : "unknown";
}

namespace {

template <class T>
constexpr bool is_half = is_narrow_float_v<T>;

// Signed overflow is undefined in C++, so integer sums go through the unsigned type, which wraps.
template <class T>
T wrapping_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}

template <class T>
T combine(ReduceOp op, T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return op == ReduceOp::min ? (a && b) : (a || b);
  } else if constexpr (is_half<T>) {
    const float x = static_cast<float>(a), y = static_cast<float>(b);
    switch (op) {
      case ReduceOp::max: return x < y ? b : a;
      case ReduceOp::min: return y < x ? b : a;
      default: return T(x + y);
    }
  } else {
    switch (op) {
      case ReduceOp::max: return a < b ? b : a;
      case ReduceOp::min: return b < a ? b : a;
      default:
        if constexpr (std::is_integral_v<T>) return wrapping_add(a, b);
        else return a + b;
    }
  }
}

template <class T>
void reduce_typed(ReduceOp op, T* acc, const T* in, int64_t count) {
  // The switch sits outside the loop so that each loop body is a plain, vectorisable expression.
  switch (op) {
    case ReduceOp::max:
      for (int64_t i = 0; i < count; ++i) acc[i] = combine(ReduceOp::max, acc[i], in[i]);
      break;
    case ReduceOp::min:
      for (int64_t i = 0; i < count; ++i) acc[i] = combine(ReduceOp::min, acc[i], in[i]);
      break;
    case ReduceOp::sum:
    case ReduceOp::avg:
      for (int64_t i = 0; i < count; ++i) acc[i] = combine(ReduceOp::sum, acc[i], in[i]);
      break;
  }
}

}  // namespace

void reduce_into(DType dtype, ReduceOp op, void* acc, const void* in, int64_t count) {
  dispatch_all(dtype, "reduce_into", [&]<class T>() {
    reduce_typed(op, static_cast<T*>(acc), static_cast<const T*>(in), count);
  });
}

void divide_by(DType dtype, void* data, int64_t count, int divisor) {
  if (divisor == 0) throw Error("divide_by: divisor is 0");
  dispatch_numeric(dtype, "avg", [&]<class T>() {
    T* p = static_cast<T*>(data);
    if constexpr (is_half<T>) {
      const float d = static_cast<float>(divisor);
      for (int64_t i = 0; i < count; ++i) p[i] = T(static_cast<float>(p[i]) / d);
    } else {
      const T d = static_cast<T>(divisor);
      for (int64_t i = 0; i < count; ++i) p[i] = p[i] / d;
    }
  });
}

}  // namespace accel
