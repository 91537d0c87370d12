// FlatUnit: the layout (offsets, padding, this rank's slice), the move of the params into the flat
// buffer, and the flat grad buffer lent to backward.
#include "runtime/strategy/zero_flat_unit.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "tensor/creation.h"
#include "tensor/meta_tensor.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"

namespace accel {

FlatUnit::FlatUnit(std::string name, const nn::StateDict& params, int rank, int world_size)
    : name_(std::move(name)), rank_(rank), world_size_(world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw Error(fmt::format("FlatUnit '{}': rank {} of world size {} is not a place in the world", name_, rank,
                            world_size));
  if (params.empty()) throw Error(fmt::format("FlatUnit '{}': got no parameters", name_));
  std::unordered_set<const TensorImpl*> seen;
  for (const auto& [param_name, p] : params) {
    const Tensor& first = params.front().second;
    if (!p.defined() || !p.is_leaf() || !is_floating(p.dtype()))
      throw Error(fmt::format("FlatUnit '{}': parameter '{}' must be a floating leaf", name_, param_name));
    if (p.dtype() != first.dtype() || p.device() != first.device())
      throw Error(fmt::format("FlatUnit '{}': parameter '{}' is {} on {} but '{}' is {} on {}; one unit holds one "
                              "dtype on one device",
                              name_, param_name, dtype_name(p.dtype()), p.device().str(), params.front().first,
                              dtype_name(first.dtype()), first.device().str()));
    if (!seen.insert(p.impl()).second)
      throw Error(fmt::format("FlatUnit '{}': parameter '{}' appears twice", name_, param_name));
    params_.push_back(p);
    names_.push_back(param_name);
    offsets_.push_back(numel_);
    numel_ += p.numel();
  }
  // Round up so the buffer splits into N equal slices; the padding is zeros and stays zero (its grads
  // are zero, so no optimizer moves it).
  padded_ = (numel_ + world_size - 1) / world_size * world_size;
  NoGradGuard no_grad;
  const bool deferred = std::any_of(params_.begin(), params_.end(), [](const Tensor& p) { return p.is_meta(); });
  if (deferred) {
    const DType dtype = params_[0].dtype();
    const Device device = params_[0].device();
    full_ = Tensor::make_view(Storage::unallocated(static_cast<size_t>(padded_) * dtype_size(dtype), device),
                              {padded_}, {1}, 0, dtype);
    for (size_t i = 0; i < params_.size(); ++i) {
      const Tensor& p = params_[i];
      // Checked whole here, so that every rank refuses it, not only the ranks whose slice has a hole.
      if (p.is_meta())
        if (const std::string missing = p.storage()->recipe()->uncovered(p.offset(), p.numel()); !missing.empty())
          throw Error(fmt::format("FlatUnit '{}': parameter '{}' ({} {}) cannot be materialised: {}", name_, names_[i],
                                  dtype_name(p.dtype()), shape_str(p.shape()), missing));
      deferred_sources_.push_back(Tensor::make_view(p.storage(), p.shape(), p.strides(), p.offset(), p.dtype()));
      p.set_data(param_view(full_, i));
    }
    return;
  }
  full_ = zeros({padded_}, params_[0].dtype(), params_[0].device());
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor view = param_view(full_, i);
    nograd::copy_(view, params_[i]);
    params_[i].set_data(view);  // every handle to the param (the optimizer's) now sees the flat buffer
  }
}

Tensor FlatUnit::shard_of(const Tensor& flat) const { return nograd::narrow(flat, 0, shard_offset(), shard_numel()); }

Tensor FlatUnit::take_initial_shard() {
  NoGradGuard no_grad;
  if (deferred_sources_.empty()) return nograd::clone(shard_of(full_));
  Tensor shard = zeros({shard_numel()}, dtype(), device());  // the padding is zero
  for (size_t i = 0; i < params_.size(); ++i) {
    const HeldRun run = held_run(i);
    if (run.numel == 0) continue;
    const Tensor dst = nograd::narrow(shard, 0, run.shard_offset, run.numel);
    const Tensor& source = deferred_sources_[i];
    try {
      if (source.is_meta()) materialize_run(source, run.param_offset, dst);
      else nograd::copy_(dst, nograd::narrow(nograd::view(nograd::contiguous(source), {source.numel()}), 0,
                                             run.param_offset, run.numel));
    } catch (const Error& e) {
      throw Error(fmt::format("FlatUnit '{}': parameter '{}': {}", name_, names_[i], e.what()));
    }
  }
  deferred_sources_.clear();
  return shard;
}

FlatUnit::HeldRun FlatUnit::held_run(size_t i) const {
  const int64_t begin = std::max(shard_offset(), offsets_[i]);
  const int64_t end = std::min(shard_offset() + shard_numel(), offsets_[i] + params_[i].numel());
  if (begin >= end) return {};
  return {begin - offsets_[i], end - begin, begin - shard_offset()};
}

Tensor FlatUnit::param_view(const Tensor& flat, size_t i) const {
  return nograd::view(nograd::narrow(flat, 0, offsets_[i], params_[i].numel()), params_[i].shape());
}

void FlatUnit::lend_grads() {
  NoGradGuard no_grad;
  if (!full_grad_.defined()) full_grad_ = zeros({padded_}, dtype(), device());
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor slot = param_view(full_grad_, i);
    const Tensor grad = params_[i].grad();
    if (grad.defined() && grad.data_ptr() == slot.data_ptr()) continue;
    if (grad.defined()) nograd::copy_(slot, grad);
    else nograd::zero_(slot);
    params_[i].set_grad(slot);
  }
}

void FlatUnit::drop_grads() {
  full_grad_ = Tensor();
  for (const Tensor& p : params_) p.set_grad(Tensor());
}

void FlatUnit::convert_to(DType dtype) {
  if (!is_floating(dtype))
    throw Error(fmt::format("FlatUnit::convert_to '{}': expected a floating dtype, got {}", name_, dtype_name(dtype)));
  NoGradGuard no_grad;
  drop_grads();
  // A released buffer (stage 3, deferred init) has no values to convert, only a dtype to change.
  Tensor converted = full_.storage()->is_released()
                         ? Tensor::make_view(Storage::unallocated(static_cast<size_t>(padded_) * dtype_size(dtype),
                                                                  full_.device()),
                                             {padded_}, {1}, 0, dtype)
                         : nograd::to_dtype(full_, dtype);
  for (size_t i = 0; i < params_.size(); ++i) params_[i].set_data(param_view(converted, i));
  full_ = converted;
}

}  // namespace accel
