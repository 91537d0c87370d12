// Tensor creation: allocation (its sizes checked against int64 overflow), fills, ranges, Philox draws
// and copies from host vectors.
#include "tensor/creation.h"

#include <fmt/format.h>

#include <cmath>
#include <new>
#include <optional>

#include "tensor/deferred_init.h"
#include "tensor/fill_recipe.h"
#include "tensor/meta_tensor.h"
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

// Under DeferredInit: a meta tensor whose recipe says fill writes all of it.
Tensor deferred(const char* op, const Shape& shape, DType dtype, Device device, const FillRecipe& fill) {
  Tensor t = make_meta(op, shape, dtype, device);
  record_fill(t, fill);
  return t;
}

Tensor filled(const char* op, const Shape& shape, double value, DType dtype, Device device) {
  if (DeferredInit::is_enabled()) return deferred(op, shape, dtype, device, FillRecipe::constant(value));
  Tensor t = allocate(op, shape, dtype, device);
  nograd::fill_(t, value);
  return t;
}

void check_floating(const char* op, DType dtype) {
  if (!is_floating(dtype))
    throw Error(fmt::format("{}: random draws need a floating dtype, got {}", op, dtype_name(dtype)));
}

// A draw of shape from fill: its values, or under DeferredInit a meta tensor that records it.
Tensor drawn(const char* op, const Shape& shape, DType dtype, Device device, const FillRecipe& fill) {
  if (DeferredInit::is_enabled()) return deferred(op, shape, dtype, device, fill);
  return fill.values(shape, 0, dtype, device);
}

}  // namespace

Tensor empty(const Shape& shape, DType dtype, Device device) {
  if (DeferredInit::is_enabled()) return make_meta("empty", shape, dtype, device);
  return allocate("empty", shape, dtype, device);
}

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

// Each draw checks its shape and dtype before the generator moves on, so a refused one leaves the
// stream where it was.
Tensor randn(const Shape& shape, Generator& gen, DType dtype, Device device) {
  const uint64_t numel = static_cast<uint64_t>(checked_numel("randn", shape));
  check_floating("randn", dtype);
  return drawn("randn", shape, dtype, device, FillRecipe::standard_normal(numel, gen));
}

namespace {

Tensor uniform_draw(const char* op, const Shape& shape, double low, double high, Generator& gen, DType dtype,
                    Device device) {
  const uint64_t numel = static_cast<uint64_t>(checked_numel(op, shape));
  check_floating(op, dtype);
  return drawn(op, shape, dtype, device, FillRecipe::uniform(low, high, numel, gen, op));
}

}  // namespace

// lo + width * u with lo 0 and width 1 is u itself.
Tensor rand(const Shape& shape, Generator& gen, DType dtype, Device device) {
  return uniform_draw("rand", shape, 0.0, 1.0, gen, dtype, device);
}

Tensor uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype, Device device) {
  return uniform_draw("uniform", shape, low, high, gen, dtype, device);
}

Tensor normal(const Shape& shape, double mean, double std, Generator& gen, DType dtype, Device device) {
  const uint64_t numel = static_cast<uint64_t>(checked_numel("normal", shape));
  check_floating("normal", dtype);
  return drawn("normal", shape, dtype, device, FillRecipe::normal(mean, std, numel, gen));
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
