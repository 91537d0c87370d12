// cpu::map: out[i] = f(in0[i], in1[i], ...) over strided, broadcast operands, on the strided
// loop; unit-stride runs get a plain loop the compiler vectorises.
#pragma once

#include <array>
#include <tuple>
#include <utility>

#include "tensor/cpu/convert.h"
#include "tensor/cpu/loop.h"
#include "tensor/tensor.h"

namespace accel::cpu {

namespace detail {
template <class TOut, class... TIn, class F, size_t... K>
void map_impl(std::index_sequence<K...>, const Tensor& out, F&& f,
              const std::array<const Tensor*, sizeof...(TIn)>& in) {
  constexpr size_t N = 1 + sizeof...(TIn);
  const std::array<Strides, N> strides{out.strides(),
                                       broadcast_strides(in[K]->shape(), in[K]->strides(), out.shape())...};
  TOut* o = static_cast<TOut*>(out.data_ptr());
  const std::tuple<const TIn*...> p{static_cast<const TIn*>(in[K]->data_ptr())...};
  for_each_row<N>(out.shape(), strides, [&](const auto& off, const auto& step, int64_t n) {
    TOut* ro = o + off[0];
    const std::tuple<const TIn*...> rp{(std::get<K>(p) + off[K + 1])...};
    if (step[0] == 1 && ((step[K + 1] == 1) && ...)) {
      for (int64_t j = 0; j < n; ++j) ro[j] = f(std::get<K>(rp)[j]...);
    } else {
      for (int64_t j = 0; j < n; ++j) ro[j * step[0]] = f(std::get<K>(rp)[j * step[K + 1]]...);
    }
  });
}
}  // namespace detail

// TIn... are the storage types of the inputs, in order.
template <class TOut, class... TIn, class F, class... Ts>
void map(const Tensor& out, F&& f, const Ts&... inputs) {
  static_assert(sizeof...(TIn) == sizeof...(Ts), "one storage type per input");
  detail::map_impl<TOut, TIn...>(std::index_sequence_for<TIn...>{}, out, std::forward<F>(f),
                                 std::array<const Tensor*, sizeof...(Ts)>{&inputs...});
}

}  // namespace accel::cpu
