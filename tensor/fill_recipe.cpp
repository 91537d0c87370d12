// FillRecipe: reserving a draw's Philox blocks, and computing (or reading) any run of its elements.
#include "tensor/fill_recipe.h"

#include <fmt/format.h>

#include "kernels/fnv1a.h"
#include "kernels/philox.h"
#include "tensor/creation.h"
#include "tensor/deferred_init.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"

namespace accel {

FillRecipe FillRecipe::constant(double value) { return FillRecipe{.kind = Kind::constant, .a = value, .source = nullptr}; }

FillRecipe FillRecipe::uniform(double low, double high, uint64_t numel, Generator& gen, const char* op) {
  if (!(low <= high)) throw Error(fmt::format("{}: low {} must not exceed high {}", op, low, high));
  const uint64_t seed = gen.seed(), offset = gen.reserve(uniform_blocks(numel));
  return FillRecipe{.kind = Kind::uniform, .a = low, .b = high, .seed = seed, .offset = offset, .source = nullptr};
}

FillRecipe FillRecipe::standard_normal(uint64_t numel, Generator& gen) {
  const uint64_t seed = gen.seed(), offset = gen.reserve(normal_blocks(numel));
  return FillRecipe{.kind = Kind::normal, .a = 0.0, .b = 1.0, .seed = seed, .offset = offset, .source = nullptr};
}

FillRecipe FillRecipe::normal(double mean, double std, uint64_t numel, Generator& gen) {
  FillRecipe fill = standard_normal(numel, gen);
  fill.a = mean;
  fill.b = std;
  fill.affine = true;
  return fill;
}

uint64_t element_source_fingerprint(const std::string& name, const Shape& shape, DType dtype) {
  Fnv1a hash;
  hash.text(name);
  for (int64_t d : shape) hash.word(static_cast<uint64_t>(d));
  return hash.word(static_cast<uint64_t>(dtype)).value();
}

std::shared_ptr<ElementSource> tensor_element_source(const Tensor& values, const std::string& name,
                                                     const std::string& origin) {
  if (!values.defined() || values.is_meta())
    throw Error(fmt::format("tensor_element_source: '{}' of {} is {}; a source needs a tensor with values", name,
                            origin, values.defined() ? "a meta tensor (built under DeferredInit)" : "undefined"));
  const Tensor flat = nograd::view(nograd::contiguous(values), {values.numel()});
  auto source = std::make_shared<ElementSource>();
  source->read = [flat](int64_t first, int64_t count) { return nograd::narrow(flat, 0, first, count); };
  source->fingerprint = element_source_fingerprint(name, values.shape(), values.dtype());
  source->description = fmt::format("'{}' of {}", name, origin);
  return source;
}

FillRecipe FillRecipe::from_source(std::shared_ptr<const ElementSource> source) {
  if (!source || !source->read) throw Error("FillRecipe::from_source: no source to read from");
  return FillRecipe{.kind = Kind::source, .source = std::move(source)};
}

namespace {

// Element first + k of the draw at p[k], on the host in f32.
template <class ValueAt>
Tensor host_draw(const Shape& shape, int64_t first, ValueAt value_at) {
  Tensor host = empty(shape, DType::f32, Device::cpu());
  float* p = host.data<float>();
  const int64_t n = host.numel();
#pragma omp parallel for if (n > 65536)
  for (int64_t k = 0; k < n; ++k) p[k] = value_at(static_cast<uint64_t>(first + k));
  return host;
}

}  // namespace

Tensor FillRecipe::values(const Shape& shape, int64_t first, DType dtype, Device device) const {
  if (first < 0) throw Error(fmt::format("FillRecipe::values: first element {} is negative", first));
  const DeferredInit real(false);  // these are the values themselves, never another recipe
  if (kind == Kind::constant) return full(shape, a, dtype, device);
  if (kind == Kind::source) {
    const int64_t n = shape_numel(shape);
    const Tensor got = source->read(first, n);
    if (got.numel() != n)
      throw Error(fmt::format("FillRecipe::values: {} gave {} elements from {}; {} expected", source->description,
                              got.numel(), first, n));
    return nograd::to_device(nograd::to_dtype(nograd::view(nograd::contiguous(got), shape), dtype), device);
  }
  const uint64_t s = seed, o = offset;
  Tensor host;
  if (kind == Kind::uniform) {
    const float lo = static_cast<float>(a), width = static_cast<float>(b - a);
    host = host_draw(shape, first, [=](uint64_t i) { return lo + width * random_uniform_at(s, o, i); });
  } else {
    host = host_draw(shape, first, [=](uint64_t i) { return random_normal_at(s, o, i); });
  }
  const Tensor drawn = nograd::to_device(nograd::to_dtype(host, dtype), device);
  return affine ? nograd::add(nograd::mul(drawn, b), a) : drawn;
}

std::string FillRecipe::str() const {
  switch (kind) {
    case Kind::constant:
      return fmt::format("constant({})", a);
    case Kind::uniform:
      return fmt::format("uniform({}, {}) at Philox seed {} block {}", a, b, seed, offset);
    case Kind::source:
      return fmt::format("the elements of {}", source->description);
    case Kind::normal:
      break;
  }
  return affine ? fmt::format("normal({}, {}) at Philox seed {} block {}", a, b, seed, offset)
                : fmt::format("randn at Philox seed {} block {}", seed, offset);
}

}  // namespace accel
