// Tensor creation: allocation (its sizes checked against int64 overflow), fills, ranges, Philox draws
// and copies from host vectors.
#include "tensor/creation.h"

#include <fmt/format.h>

#include <cmath>
#include <new>
#include <optional>

#include "kernels/philox.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"

namespace accel {

namespace {

// The element count of shape, checked for op: no negative dim, and every count and stride fits in int64.
int64_t checked_numel(const char* op, const Shape& shape) {
  for (int64_t s : shape)
    if (s < 0) throw Error(fmt::format("{}: negative size in shape {}", op, shape_str(shape)));
  contiguous_strides(shape, op);
  return shape_numel(shape, op);
}

// A new contiguous tensor for op, its sizes checked first, so that a shape too large to count or to
// address is an error rather than a small allocation that later writes run past.
Tensor allocate(const char* op, const Shape& shape, DType dtype, Device device) {
  const int64_t numel = checked_numel(op, shape);
  const int64_t element = static_cast<int64_t>(dtype_size(dtype));
  const std::optional<int64_t> bytes = mul_checked(numel, element);
  if (!bytes)
    throw Error(fmt::format("{}: shape {} of {} takes {} x {} bytes, more than int64 can count", op, shape_str(shape),
                            dtype_name(dtype), numel, element));
  std::shared_ptr<Storage> storage;
  try {
    storage = std::make_shared<Storage>(static_cast<size_t>(*bytes), device);
  } catch (const std::bad_alloc&) {
    throw Error(fmt::format("{}: cannot allocate {} bytes for shape {} of {} on {}", op, *bytes, shape_str(shape),
                            dtype_name(dtype), device.str()));
  }
  return Tensor::make_view(std::move(storage), shape, contiguous_strides(shape, op), 0, dtype);
}

Tensor filled(const char* op, const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = allocate(op, shape, dtype, device);
  nograd::fill_(t, value);
  return t;
}

}  // namespace

Tensor empty(const Shape& shape, DType dtype, Device device) { return allocate("empty", shape, dtype, device); }

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  return filled("full", shape, value, dtype, device);
}

Tensor zeros(const Shape& shape, DType dtype, Device device) { return filled("zeros", shape, 0.0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return filled("ones", shape, 1.0, dtype, device); }
Tensor scalar_tensor(double value, DType dtype, Device device) { return full({}, value, dtype, device); }
Tensor empty_like(const Tensor& like) { return empty(like.shape(), like.dtype(), like.device()); }
Tensor zeros_like(const Tensor& like) { return zeros(like.shape(), like.dtype(), like.device()); }
Tensor ones_like(const Tensor& like) { return ones(like.shape(), like.dtype(), like.device()); }
Tensor full_like(const Tensor& like, double value) { return full(like.shape(), value, like.dtype(), like.device()); }

Tensor arange(double start, double end, double step, DType dtype, Device device) {
  if (step == 0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step))
    throw Error(fmt::format("arange: invalid range start {} end {} step {}", start, end, step));
  const double count = std::ceil((end - start) / step);
  // 2^63 is the first double past int64 (converting a larger one is undefined).
  if (!(count < 9223372036854775808.0))
    throw Error(fmt::format("arange: start {} end {} step {} gives {} elements, more than int64 can count", start,
                            end, step, count));
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
  Tensor values = allocate("arange", {n}, DType::f64, Device::cpu());
  double* p = values.data<double>();
  for (int64_t i = 0; i < n; ++i) p[i] = start + static_cast<double>(i) * step;
  return nograd::to_device(nograd::to_dtype(values, dtype), device);
}

Tensor arange(int64_t end, DType dtype, Device device) { return arange(0.0, static_cast<double>(end), 1.0, dtype, device); }

namespace {

// Draws on the host in f32 and casts, so every device and dtype sees the same stream.
template <class Draw>
Tensor draw(const char* op, const Shape& shape, DType dtype, Device device, Draw value_at) {
  if (!is_floating(dtype))
    throw Error(fmt::format("{}: random draws need a floating dtype, got {}", op, dtype_name(dtype)));
  Tensor host = allocate(op, shape, DType::f32, Device::cpu());
  float* p = host.data<float>();
  const int64_t n = host.numel();
#pragma omp parallel for if (n > 65536)
  for (int64_t i = 0; i < n; ++i) p[i] = value_at(static_cast<uint64_t>(i));
  return nograd::to_device(nograd::to_dtype(host, dtype), device);
}

}  // namespace

Tensor randn(const Shape& shape, Generator& gen, DType dtype, Device device) {
  // Checked before the generator moves on, so a refused shape leaves its stream where it was.
  const uint64_t numel = static_cast<uint64_t>(checked_numel("randn", shape));
  const uint64_t seed = gen.seed(), offset = gen.reserve(normal_blocks(numel));
  return draw("randn", shape, dtype, device, [=](uint64_t i) { return random_normal_at(seed, offset, i); });
}

Tensor rand(const Shape& shape, Generator& gen, DType dtype, Device device) {
  // Checked before the generator moves on, so a refused shape leaves its stream where it was.
  const uint64_t numel = static_cast<uint64_t>(checked_numel("rand", shape));
  const uint64_t seed = gen.seed(), offset = gen.reserve(uniform_blocks(numel));
  return draw("rand", shape, dtype, device, [=](uint64_t i) { return random_uniform_at(seed, offset, i); });
}

Tensor uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype, Device device) {
  if (!(low <= high)) throw Error(fmt::format("uniform: low {} must not exceed high {}", low, high));
  const uint64_t numel = static_cast<uint64_t>(checked_numel("uniform", shape));
  const uint64_t seed = gen.seed(), offset = gen.reserve(uniform_blocks(numel));
  const float lo = static_cast<float>(low), width = static_cast<float>(high - low);
  return draw("uniform", shape, dtype, device,
              [=](uint64_t i) { return lo + width * random_uniform_at(seed, offset, i); });
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  const int64_t numel = checked_numel("from_vector", shape);
  if (numel != static_cast<int64_t>(values.size()))
    throw Error(fmt::format("from_vector: {} values do not fill shape {} ({} elements)", values.size(),
                            shape_str(shape), numel));
  Tensor host = allocate("from_vector", shape, dtype_of<T>(), Device::cpu());
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
template Tensor from_vector<Float8E4M3>(const std::vector<Float8E4M3>&, const Shape&, Device);
template Tensor from_vector<Float8E5M2>(const std::vector<Float8E5M2>&, const Shape&, Device);

}  // namespace accel
