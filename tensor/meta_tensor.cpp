// Meta tensors: recording initialisers on a meta storage, and materialising any run of its elements
// (contiguous regions by runs of the fill, strided ones element by element on the host).
#include "tensor/meta_tensor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "kernels/fnv1a.h"
#include "tensor/creation.h"
#include "tensor/deferred_init.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"

namespace accel {

namespace {

// Larger runs of a random fill are computed in pieces of this many elements, so materialising holds
// a few temporaries of at most this size rather than of the whole run.
constexpr int64_t kChunk = int64_t{1} << 20;

// Whether a region is one run of storage elements, [offset, offset + numel): its strides are the
// contiguous ones wherever the size exceeds 1 (a narrowed row range, a selected row).
bool is_run(const InitRecipe::Step& step) {
  int64_t expected = 1;
  for (size_t d = step.shape.size(); d-- > 0;) {
    if (step.shape[d] != 1 && step.strides[d] != expected) return false;
    expected *= step.shape[d];
  }
  return true;
}

int64_t region_numel(const InitRecipe::Step& step) { return shape_numel(step.shape); }

// Calls visit(j, s) for each element of the region: j its row-major index in the region, s its
// index in the storage.
template <class Visit>
void for_each_region_element(const InitRecipe::Step& step, Visit visit) {
  const int64_t n = region_numel(step);
  const size_t dims = step.shape.size();
  Shape index = step.shape;  // the current element's index, from all zeros
  std::fill(index.begin(), index.end(), 0);
  int64_t s = step.offset;
  for (int64_t j = 0; j < n; ++j) {
    visit(j, s);
    for (size_t d = dims; d-- > 0;) {  // the next index, row-major
      s += step.strides[d];
      if (++index[d] < step.shape[d]) break;
      s -= step.strides[d] * step.shape[d];
      index[d] = 0;
    }
  }
}

// Whether step is a run that covers all of [first, first + count).
bool covers(const InitRecipe::Step& step, int64_t first, int64_t count) {
  return is_run(step) && step.offset <= first && first + count <= step.offset + region_numel(step);
}

}  // namespace

void InitRecipe::add(Step step) {
  if (step.shape.size() != step.strides.size())
    throw Error(fmt::format("InitRecipe::add: shape {} and strides {} differ in rank", shape_str(step.shape),
                            shape_str(step.strides)));
  steps_.push_back(std::move(step));
}

std::string InitRecipe::uncovered(int64_t first, int64_t count) const {
  for (const Step& step : steps_)
    if (covers(step, first, count)) return "";
  std::vector<uint8_t> covered(static_cast<size_t>(count), 0);
  for (const Step& step : steps_)
    for_each_region_element(step, [&](int64_t, int64_t s) {
      if (s >= first && s < first + count) covered[static_cast<size_t>(s - first)] = 1;
    });
  const auto hole = std::find(covered.begin(), covered.end(), uint8_t{0});
  if (hole == covered.end()) return "";
  const int64_t missing = std::count(covered.begin(), covered.end(), uint8_t{0});
  return fmt::format("{} of its elements, the first at {}, were written by no initialiser (made with empty() "
                     "and never initialised?)",
                     missing, first + (hole - covered.begin()));
}

void InitRecipe::write(int64_t first, const Tensor& dst) const {
  if (dst.dtype() != dtype_ || !dst.is_contiguous())
    throw Error(fmt::format("InitRecipe::write: expected a contiguous {} destination, got {}", dtype_name(dtype_),
                            dst.str()));
  const int64_t count = dst.numel();
  if (first < 0 || first + count > numel_)
    throw Error(fmt::format("InitRecipe::write: elements [{}, {}) are outside the {} of the storage", first,
                            first + count, numel_));
  const DeferredInit real(false);  // the temporaries below hold values
  const Tensor flat = nograd::view(dst, {count});
  // Steps before the last one that covers the whole run are overwritten: skip them.
  size_t begin = 0;
  for (size_t k = 0; k < steps_.size(); ++k)
    if (covers(steps_[k], first, count)) begin = k;
  const bool strided = std::any_of(steps_.begin() + static_cast<long>(begin), steps_.end(),
                                   [](const Step& step) { return !is_run(step); });
  if (strided && !dst.device().is_cpu()) {  // element by element on the host, then one copy
    const Tensor host = empty({count}, dtype_, Device::cpu());
    write(first, host);
    nograd::copy_(flat, host);
    return;
  }
  for (size_t k = begin; k < steps_.size(); ++k) {
    const Step& step = steps_[k];
    if (!is_run(step)) {
      write_strided_step(step, first, flat);
      continue;
    }
    const int64_t lo = std::max(first, step.offset), hi = std::min(first + count, step.offset + region_numel(step));
    if (lo >= hi) continue;
    if (step.fill.is_constant()) {
      nograd::fill_(nograd::narrow(flat, 0, lo - first, hi - lo), step.fill.a);
      continue;
    }
    for (int64_t at = lo; at < hi; at += kChunk) {
      const int64_t n = std::min(kChunk, hi - at);
      nograd::copy_(nograd::narrow(flat, 0, at - first, n), step.fill.values({n}, at - step.offset, dtype_, dst.device()));
    }
  }
}

void InitRecipe::write_strided_step(const Step& step, int64_t first, const Tensor& flat) const {
  const int64_t count = flat.numel();
  int64_t j_min = -1, j_max = -1;
  for_each_region_element(step, [&](int64_t j, int64_t s) {
    if (s < first || s >= first + count) return;
    if (j_min < 0) j_min = j;
    j_max = j;
  });
  if (j_min < 0) return;
  const bool per_element = !step.fill.is_constant();
  const Tensor values = per_element ? step.fill.values({j_max - j_min + 1}, j_min, dtype_, Device::cpu())
                                    : full({1}, step.fill.a, dtype_, Device::cpu());
  const size_t element = dtype_size(dtype_);
  const auto* from = static_cast<const char*>(values.data_ptr());
  auto* to = static_cast<char*>(flat.data_ptr());
  for_each_region_element(step, [&](int64_t j, int64_t s) {
    if (s < first || s >= first + count) return;
    const int64_t source = per_element ? j - j_min : 0;
    std::memcpy(to + static_cast<size_t>(s - first) * element, from + static_cast<size_t>(source) * element, element);
  });
}

uint64_t InitRecipe::fingerprint() const {
  Fnv1a hash;
  auto mix_value = [&](const auto& value) { hash.bytes(&value, sizeof(value)); };
  mix_value(static_cast<int>(dtype_));
  mix_value(numel_);
  for (const Step& step : steps_) {
    for (int64_t s : step.shape) mix_value(s);
    for (int64_t s : step.strides) mix_value(s);
    mix_value(step.offset);
    mix_value(static_cast<int>(step.fill.kind));
    mix_value(step.fill.a);
    mix_value(step.fill.b);
    mix_value(step.fill.affine);
    mix_value(step.fill.seed);
    mix_value(step.fill.offset);
    if (step.fill.source) mix_value(step.fill.source->fingerprint);
  }
  return hash.value();
}

Tensor make_meta(const char* op, const Shape& shape, DType dtype, Device device) {
  const Strides strides = contiguous_strides(shape, op);
  const int64_t numel = shape_numel(shape, op);
  const std::optional<int64_t> bytes = mul_checked(numel, static_cast<int64_t>(dtype_size(dtype)));
  if (!bytes)
    throw Error(fmt::format("{}: shape {} of {} takes more bytes than int64 can count", op, shape_str(shape),
                            dtype_name(dtype)));
  auto storage = Storage::meta(static_cast<size_t>(*bytes), device, std::make_shared<InitRecipe>(dtype, numel));
  return Tensor::make_view(std::move(storage), shape, strides, 0, dtype);
}

namespace {

InitRecipe& recipe_of(const Tensor& t, const char* op) {
  if (!t.is_meta()) throw Error(fmt::format("{}: {} is not a meta tensor", op, t.defined() ? t.str() : "undefined"));
  return *t.storage()->recipe();
}

}  // namespace

void record_fill(const Tensor& t, const FillRecipe& fill) {
  recipe_of(t, "record_fill").add({t.shape(), t.strides(), t.offset(), fill});
}

void materialize_run(const Tensor& t, int64_t first, const Tensor& dst) {
  const InitRecipe& recipe = recipe_of(t, "materialize_run");
  if (!t.is_contiguous())
    throw Error(fmt::format("materialize_run: the meta tensor of shape {} must be contiguous", shape_str(t.shape())));
  if (first < 0 || first + dst.numel() > t.numel())
    throw Error(fmt::format("materialize_run: elements [{}, {}) are outside the {} of shape {}", first,
                            first + dst.numel(), t.numel(), shape_str(t.shape())));
  const std::string missing = recipe.uncovered(t.offset() + first, dst.numel());
  if (!missing.empty())
    throw Error(fmt::format("materialize_run: the {} tensor of shape {}: {}", dtype_name(t.dtype()),
                            shape_str(t.shape()), missing));
  recipe.write(t.offset() + first, dst);
}

void materialize_in_place(const Tensor& t, const std::string& name) {
  if (!t.is_meta()) return;
  const std::shared_ptr<Storage>& storage = t.storage();
  const InitRecipe& recipe = *storage->recipe();
  const std::string missing = recipe.uncovered(0, recipe.numel());
  if (!missing.empty())
    throw Error(fmt::format("materialize: '{}', a {} tensor of shape {}: {}", name, dtype_name(t.dtype()),
                            shape_str(t.shape()), missing));
  const std::shared_ptr<InitRecipe> taken = storage->allocate_from_meta();
  taken->write(0, Tensor::make_view(storage, {taken->numel()}, {1}, 0, taken->dtype()));
}

Tensor meta_to_device(const Tensor& t, Device device) {
  const InitRecipe& recipe = recipe_of(t, "meta_to_device");
  auto storage = Storage::meta(t.storage()->nbytes(), device, std::make_shared<InitRecipe>(recipe));
  return Tensor::make_view(std::move(storage), t.shape(), t.strides(), t.offset(), t.dtype());
}

}  // namespace accel
