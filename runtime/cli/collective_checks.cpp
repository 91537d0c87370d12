// The collective checks of `accel test`. Inputs are small integers, so every sum over the ranks is
// exact in every dtype (bf16 included) and the expected results do not depend on the order in which
// a backend combines the ranks: they are computed here in int64 and converted once.
#include "runtime/cli/collective_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "collective/communicator.h"
#include "tensor/creation.h"
#include "tensor/nograd/views.h"

namespace accel {

namespace {

template <class T>
constexpr bool kHalf = is_narrow_float_v<T>;  // f16, bf16 and fp8: built from and read as float

// Values lie in [-a, a] with a * ranks <= 256, so every partial sum is an integer bf16 holds exactly.
int64_t amplitude(int ranks) { return std::clamp<int64_t>(256 / ranks, 1, 20); }

template <class T>
T from_int(int64_t v) {
  if constexpr (std::is_same_v<T, bool>) return v != 0;
  else if constexpr (kHalf<T>) return T(static_cast<float>(v));
  else return static_cast<T>(v);
}

template <class T>
double to_double(T v) {
  if constexpr (kHalf<T>) return static_cast<float>(v);
  else return static_cast<double>(v);
}

// Rank r's element i as an integer. The pattern differs between ranks (13 r) and along the tensor
// (7 i), so a value in the wrong slot or from the wrong rank shows.
int64_t int_input(int rank, int64_t i, int ranks) {
  const int64_t a = amplitude(ranks);
  return (i * 7 + rank * 13) % (2 * a + 1) - a;
}

template <class T>
T input(int rank, int64_t i, int ranks) {
  if constexpr (std::is_same_v<T, bool>) return (i + rank) % 3 == 0;
  else return from_int<T>(int_input(rank, i, ranks));
}

// Element i of the reduction over every rank's input: bool sum/max is or, min is and; avg divides
// the exact sum once, in the dtype's compute type (f32 for halves), integers truncating toward zero.
template <class T>
T reduced(ReduceOp op, int64_t i, int ranks) {
  if constexpr (std::is_same_v<T, bool>) {
    bool any = false, all = true;
    for (int r = 0; r < ranks; ++r) {
      any = any || input<bool>(r, i, ranks);
      all = all && input<bool>(r, i, ranks);
    }
    return op == ReduceOp::min ? all : any;
  } else {
    int64_t sum = 0, hi = std::numeric_limits<int64_t>::min(), lo = std::numeric_limits<int64_t>::max();
    for (int r = 0; r < ranks; ++r) {
      const int64_t v = int_input(r, i, ranks);
      sum += v;
      hi = std::max(hi, v);
      lo = std::min(lo, v);
    }
    switch (op) {
      case ReduceOp::sum: return from_int<T>(sum);
      case ReduceOp::max: return from_int<T>(hi);
      case ReduceOp::min: return from_int<T>(lo);
      case ReduceOp::avg:
        if constexpr (std::is_same_v<T, double>) return static_cast<double>(sum) / ranks;
        else if constexpr (std::is_same_v<T, float> || kHalf<T>)
          return T(static_cast<float>(sum) / static_cast<float>(ranks));
        else return static_cast<T>(sum / ranks);
    }
    return T{};
  }
}

// A new tensor of shape whose element i (row-major) is f(i).
template <class T, class F>
Tensor filled(const Shape& shape, DType dtype, F f) {
  Tensor t = empty(shape, dtype);
  T* p = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = f(i);
  return t;
}

// Overwrites t with values no check expects (results lie within [-256, 256]; bool takes !want), so an
// output that the backend never wrote cannot pass.
template <class T, class F>
void poison(const Tensor& t, F want) {
  T* p = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if constexpr (std::is_same_v<T, bool>) p[i] = !want(i);
    else p[i] = from_int<T>(1000);
  }
}

// "" when element i of t equals want(i) everywhere, else how many differ and the first difference.
template <class T, class F>
std::string mismatch(const Tensor& t, F want, const char* what = "") {
  const T* p = t.data<T>();
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!(to_double(p[i]) == to_double(want(i))) && bad++ == 0) first = i;
  if (bad == 0) return "";
  return fmt::format("{}{} of {} elements differ; first at {}: got {}, expected {}", what, bad, t.numel(), first,
                     to_double(p[first]), to_double(want(first)));
}

// Both problems, or whichever is not empty.
std::string both(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + "; " + b;
}

// all_reduce (every op, out of place and in place), broadcast and send/recv, whose buffers have the
// same length on every rank.
template <class T>
void check_equal_length_ops(Communicator& comm, DType dtype, CheckList& checks) {
  const int ranks = comm.size(), rank = comm.rank();
  const std::string prefix = comm.backend();
  const char* dt = dtype_name(dtype);
  auto mine = [&](int64_t i) { return input<T>(rank, i, ranks); };

  // 1031 is prime: no rank count divides it, so the ring's chunks are uneven.
  for (const int64_t n : {int64_t{1}, int64_t{5}, int64_t{1031}}) {
    for (const ReduceOp op : kAllReduceOps) {
      if (dtype == DType::boolean && op == ReduceOp::avg) continue;  // bool has no average
      if (is_float8(dtype)) continue;                                   // fp8 only moves: never reduced
      const char* opn = reduce_op_name(op);
      auto want = [&](int64_t i) { return reduced<T>(op, i, ranks); };
      checks.run(fmt::format("{} all_reduce {} {} n={}", prefix, opn, dt, n), [&] {
        const Tensor in = filled<T>({n}, dtype, mine);
        const Tensor out = empty({n}, dtype);
        poison<T>(out, want);
        comm.all_reduce(in, out, op);
        return both(mismatch<T>(out, want), mismatch<T>(in, mine, "out of place changed its input: "));
      });
      checks.run(fmt::format("{} all_reduce {} {} n={} in place", prefix, opn, dt, n), [&] {
        const Tensor t = filled<T>({n}, dtype, mine);
        comm.all_reduce(t, op);
        return mismatch<T>(t, want);
      });
    }

    const int root = ranks - 1;
    checks.run(fmt::format("{} broadcast {} n={} from rank {}", prefix, dt, n, root), [&] {
      const Tensor t = filled<T>({n}, dtype, mine);
      comm.broadcast(t, root);
      return mismatch<T>(t, [&](int64_t i) { return input<T>(root, i, ranks); });
    });

    // Each rank sends to its right neighbour and receives from its left one (itself with one rank).
    checks.run(fmt::format("{} send/recv {} n={} around the ring", prefix, dt, n), [&] {
      const int right = (rank + 1) % ranks, left = (rank + ranks - 1) % ranks;
      const Tensor out = filled<T>({n}, dtype, mine);
      const Tensor in = empty({n}, dtype);
      auto want = [&](int64_t i) { return input<T>(left, i, ranks); };
      poison<T>(in, want);
      Work sent = comm.send_async(out, right, 5);
      comm.recv(in, left, 5);
      sent.wait();
      return mismatch<T>(in, want);
    });
  }
}

// reduce_scatter, all_gather and gather, whose result is ranks times a per-rank part.
template <class T>
void check_sliced_ops(Communicator& comm, DType dtype, CheckList& checks) {
  const int ranks = comm.size(), rank = comm.rank();
  const std::string prefix = comm.backend();
  const char* dt = dtype_name(dtype);
  auto mine = [&](int64_t i) { return input<T>(rank, i, ranks); };

  // Slot r belongs to rank r.
  for (const int64_t m : {int64_t{1}, int64_t{5}, int64_t{257}}) {
    const int64_t total = ranks * m;
    auto slot_of_every_rank = [&](int64_t i) { return input<T>(static_cast<int>(i / m), i % m, ranks); };
    for (const ReduceOp op : kAllReduceOps) {
      if (dtype == DType::boolean && op == ReduceOp::avg) continue;
      if (is_float8(dtype)) continue;
      const char* opn = reduce_op_name(op);
      // Rank r receives slot r of the reduction of every rank's input.
      auto want = [&](int64_t i) { return reduced<T>(op, rank * m + i, ranks); };
      checks.run(fmt::format("{} reduce_scatter {} {} n={}", prefix, opn, dt, total), [&] {
        const Tensor in = filled<T>({total}, dtype, mine);
        const Tensor out = empty({m}, dtype);
        poison<T>(out, want);
        comm.reduce_scatter(in, out, op);
        return both(mismatch<T>(out, want), mismatch<T>(in, mine, "out of place changed its input: "));
      });
      checks.run(fmt::format("{} reduce_scatter {} {} n={} in place", prefix, opn, dt, total), [&] {
        const Tensor whole = filled<T>({total}, dtype, mine);
        const Tensor slot = nograd::narrow(whole, 0, rank * m, m);
        comm.reduce_scatter(whole, slot, op);
        return mismatch<T>(slot, want);
      });
    }

    checks.run(fmt::format("{} all_gather {} n={}", prefix, dt, total), [&] {
      const Tensor in = filled<T>({m}, dtype, mine);
      const Tensor out = empty({total}, dtype);
      poison<T>(out, slot_of_every_rank);
      comm.all_gather(in, out);
      return mismatch<T>(out, slot_of_every_rank);
    });
    checks.run(fmt::format("{} all_gather {} n={} in place", prefix, dt, total), [&] {
      const Tensor out = empty({total}, dtype);
      poison<T>(out, slot_of_every_rank);
      const Tensor slot = nograd::narrow(out, 0, rank * m, m);
      std::memcpy(slot.data_ptr(), filled<T>({m}, dtype, mine).data_ptr(), slot.nbytes());
      comm.all_gather(slot, out);
      return mismatch<T>(out, slot_of_every_rank);
    });

    const int root = ranks - 1;
    checks.run(fmt::format("{} gather {} n={} to rank {}", prefix, dt, total, root), [&] {
      const Tensor in = filled<T>({m}, dtype, mine);
      if (rank != root) {
        comm.gather(in, Tensor(), root);
        return std::string();
      }
      const Tensor out = empty({total}, dtype);
      poison<T>(out, slot_of_every_rank);
      comm.gather(in, out, root);
      return mismatch<T>(out, slot_of_every_rank);
    });
  }
}

template <class T>
void check_dtype(Communicator& comm, DType dtype, CheckList& checks) {
  check_equal_length_ops<T>(comm, dtype, checks);
  check_sliced_ops<T>(comm, dtype, checks);
}

}  // namespace

void check_collectives(Communicator& comm, CheckList& checks) {
  for (const DType dtype : kAllDTypes)
    dispatch_all(dtype, "check_collectives", [&]<class T>() { check_dtype<T>(comm, dtype, checks); });

  const int ranks = comm.size(), rank = comm.rank();
  const std::string prefix = comm.backend();
  checks.run(prefix + " barrier", [&] {
    comm.barrier();
    return std::string();
  });
  // Three operations of different kinds in flight at once, waited for in reverse order.
  checks.run(prefix + " async all_reduce, all_gather and broadcast in flight together", [&] {
    const int64_t n = 1031;
    const Tensor sum = filled<float>({n}, DType::f32, [&](int64_t i) { return input<float>(rank, i, ranks); });
    const Tensor part = filled<int64_t>({n}, DType::i64, [&](int64_t i) { return input<int64_t>(rank, i, ranks); });
    const Tensor gathered = empty({ranks * n}, DType::i64);
    const Tensor half = filled<BFloat16>({n}, DType::bf16, [&](int64_t i) { return input<BFloat16>(rank, i, ranks); });
    Work w0 = comm.all_reduce_async(sum, ReduceOp::sum);
    Work w1 = comm.all_gather_async(part, gathered);
    Work w2 = comm.broadcast_async(half, 0);
    w2.wait();
    w1.wait();
    w0.wait();
    return both(
        both(mismatch<float>(sum, [&](int64_t i) { return reduced<float>(ReduceOp::sum, i, ranks); }, "all_reduce: "),
             mismatch<int64_t>(gathered,
                               [&](int64_t i) { return input<int64_t>(static_cast<int>(i / n), i % n, ranks); },
                               "all_gather: ")),
        mismatch<BFloat16>(half, [&](int64_t i) { return input<BFloat16>(0, i, ranks); }, "broadcast: "));
  });
}

}  // namespace accel
