// nn::Sequential: chaining and indexed access.
#include "nn/sequential.h"

#include <fmt/format.h>

namespace accel::nn {

Tensor Sequential::forward_impl(const Tensor& x) {
  Tensor out = x;
  for (const auto& entry : children()) out = entry.second->forward(out);
  return out;
}

Module& Sequential::operator[](size_t index) const {
  if (index >= size()) throw Error(fmt::format("Sequential: index {} out of range for {} modules", index, size()));
  return *children()[index].second;
}

}  // namespace accel::nn
