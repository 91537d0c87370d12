// Tensor creation: allocation, fills, ranges, Philox draws and copies from host vectors.
#include "tensor/creation.h"

#include <fmt/format.h>

#include <cmath>

#include "kernels/philox.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"

namespace accel {

Tensor empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t s : shape)
    if (s < 0) throw Error(fmt::format("empty: negative size in shape {}", shape_str(shape)));
  const int64_t numel = shape_numel(shape);
  auto storage = std::make_shared<Storage>(static_cast<size_t>(numel) * dtype_size(dtype), device);
  return Tensor::make_view(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
}

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  nograd::fill_(t, value);
  return t;
}

Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }
Tensor scalar_tensor(double value, DType dtype, Device device) { return full({}, value, dtype, device); }
Tensor empty_like(const Tensor& like) { return empty(like.shape(), like.dtype(), like.device()); }
Tensor zeros_like(const Tensor& like) { return zeros(like.shape(), like.dtype(), like.device()); }
Tensor ones_like(const Tensor& like) { return ones(like.shape(), like.dtype(), like.device()); }
Tensor full_like(const Tensor& like, double value) { return full(like.shape(), value, like.dtype(), like.device()); }

Tensor arange(double start, double end, double step, DType dtype, Device device) {
  if (step == 0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
    throw Error(fmt::format("arange: invalid range start {} end {} step {}", start, end, step));
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((end - start) / step)));
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[i] = start + static_cast<double>(i) * step;
  return nograd::to_device(nograd::to_dtype(from_vector(values), dtype), device);
}

Tensor arange(int64_t end, DType dtype, Device device) { return arange(0.0, static_cast<double>(end), 1.0, dtype, device); }

namespace {

// Draws on the host in f32 and casts, so every device and dtype sees the same stream.
template <class Draw>
Tensor draw(const char* op, const Shape& shape, DType dtype, Device device, Draw value_at) {
  if (!is_floating(dtype))
    throw Error(fmt::format("{}: random draws need a floating dtype, got {}", op, dtype_name(dtype)));
  Tensor host = empty(shape, DType::f32, Device::cpu());
  float* p = host.data<float>();
  const int64_t n = host.numel();
#pragma omp parallel for if (n > 65536)
  for (int64_t i = 0; i < n; ++i) p[i] = value_at(static_cast<uint64_t>(i));
  return nograd::to_device(nograd::to_dtype(host, dtype), device);
}

}  // namespace

Tensor randn(const Shape& shape, Generator& gen, DType dtype, Device device) {
  const uint64_t seed = gen.seed(), offset = gen.reserve(normal_blocks(static_cast<uint64_t>(shape_numel(shape))));
  return draw("randn", shape, dtype, device, [=](uint64_t i) { return random_normal_at(seed, offset, i); });
}

Tensor rand(const Shape& shape, Generator& gen, DType dtype, Device device) {
  const uint64_t seed = gen.seed(), offset = gen.reserve(uniform_blocks(static_cast<uint64_t>(shape_numel(shape))));
  return draw("rand", shape, dtype, device, [=](uint64_t i) { return random_uniform_at(seed, offset, i); });
}

Tensor uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype, Device device) {
  if (!(low <= high)) throw Error(fmt::format("uniform: low {} must not exceed high {}", low, high));
  const uint64_t seed = gen.seed(), offset = gen.reserve(uniform_blocks(static_cast<uint64_t>(shape_numel(shape))));
  const float lo = static_cast<float>(low), width = static_cast<float>(high - low);
  return draw("uniform", shape, dtype, device,
              [=](uint64_t i) { return lo + width * random_uniform_at(seed, offset, i); });
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  if (shape_numel(shape) != static_cast<int64_t>(values.size()))
    throw Error(fmt::format("from_vector: {} values do not fill shape {} ({} elements)", values.size(),
                            shape_str(shape), shape_numel(shape)));
  Tensor host = empty(shape, dtype_of<T>(), Device::cpu());
  T* p = static_cast<T*>(host.data_ptr());
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return nograd::to_device(host, device);
}

template Tensor from_vector<double>(const std::vector<double>&, const Shape&, Device);
template Tensor from_vector<float>(const std::vector<float>&, const Shape&, Device);
template Tensor from_vector<Half>(const std::vector<Half>&, const Shape&, Device);
template Tensor from_vector<BFloat16>(const std::vector<BFloat16>&, const Shape&, Device);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&, Device);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&, Device);
template Tensor from_vector<bool>(const std::vector<bool>&, const Shape&, Device);

}  // namespace accel
