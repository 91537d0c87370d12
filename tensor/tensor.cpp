// Tensor handle: metadata accessors, host access, printing and the autograd metadata slot.
#include "tensor/tensor.h"

#include <fmt/format.h>

#include <ostream>

#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"

namespace accel {

Tensor Tensor::make_view(std::shared_ptr<Storage> storage, Shape shape, Strides strides, int64_t offset,
                         DType dtype) {
  if (shape.size() != strides.size())
    throw Error(fmt::format("Tensor::make_view: shape {} and strides {} differ in rank", shape_str(shape),
                            shape_str(strides)));
  shape_numel(shape, "Tensor::make_view");  // every view's numel() must be countable
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

void Tensor::check_defined(const char* what) const {
  if (!impl_) throw Error(fmt::format("Tensor::{}: the tensor is undefined (default-constructed)", what));
}

const Shape& Tensor::shape() const {
  check_defined("shape");
  return impl_->shape;
}

int64_t Tensor::size(int64_t dim) const { return shape()[normalize_dim("Tensor::size", dim, this->dim())]; }

const Strides& Tensor::strides() const {
  check_defined("strides");
  return impl_->strides;
}

int64_t Tensor::stride(int64_t dim) const { return strides()[normalize_dim("Tensor::stride", dim, this->dim())]; }

int64_t Tensor::offset() const {
  check_defined("offset");
  return impl_->offset;
}

int64_t Tensor::numel() const { return shape_numel(shape()); }

size_t Tensor::nbytes() const {
  const std::optional<int64_t> bytes = mul_checked(numel(), static_cast<int64_t>(dtype_size(dtype())));
  if (!bytes)
    throw Error(fmt::format("Tensor::nbytes: shape {} of {} takes {} x {} bytes, more than int64 can count",
                            shape_str(shape()), dtype_name(dtype()), numel(), dtype_size(dtype())));
  return static_cast<size_t>(*bytes);
}

DType Tensor::dtype() const {
  check_defined("dtype");
  return impl_->dtype;
}

Device Tensor::device() const {
  check_defined("device");
  return impl_->storage->device();
}

bool Tensor::is_contiguous() const {
  const Shape& s = shape();
  if (shape_numel(s) == 0) return true;  // no element to be out of place
  int64_t expected = 1;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == 1) continue;
    if (impl_->strides[i] != expected) return false;
    expected *= s[i];
  }
  return true;
}

const std::shared_ptr<Storage>& Tensor::storage() const {
  check_defined("storage");
  return impl_->storage;
}

void* Tensor::data_ptr() const {
  check_defined("data_ptr");
  if (impl_->storage->is_meta())
    throw Error(fmt::format("Tensor::data_ptr: this {} tensor of shape {} is not materialised: it was made under "
                            "accel::DeferredInit (init_empty_weights) and has a shape but no data; prepare its model "
                            "with an Accelerator, or call nn::materialize, before reading it",
                            dtype_name(impl_->dtype), shape_str(impl_->shape)));
  if (impl_->storage->is_released())
    throw Error(fmt::format("Tensor::data_ptr: the data of this {} tensor of shape {} was released (a sharded "
                            "parameter read outside its unit's forward and backward? gather it first, e.g. "
                            "through Accelerator::get_state_dict)",
                            dtype_name(impl_->dtype), shape_str(impl_->shape)));
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * static_cast<int64_t>(dtype_size(impl_->dtype));
}

void Tensor::check_dtype_for_access(DType requested) const {
  if (dtype() != requested)
    throw Error(fmt::format("Tensor::data: tensor holds {}, but {} was requested", dtype_name(dtype()),
                            dtype_name(requested)));
}

double Tensor::item() const {
  if (numel() != 1)
    throw Error(fmt::format("Tensor::item: expected a one-element tensor, got shape {}", shape_str(shape())));
  const Tensor host = nograd::to_device(*this, Device::cpu());
  return dispatch_all(dtype(), "Tensor::item", [&]<class T>() -> double {
    const T value = *static_cast<const T*>(host.data_ptr());
    if constexpr (is_narrow_float_v<T>) return static_cast<float>(value);
    else return static_cast<double>(value);
  });
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  check_dtype_for_access(dtype_of<T>());
  const Tensor host = nograd::contiguous(nograd::to_device(*this, Device::cpu()));
  const T* p = static_cast<const T*>(host.data_ptr());
  return std::vector<T>(p, p + host.numel());
}

template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<Half> Tensor::to_vector<Half>() const;
template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;
template std::vector<Float8E4M3> Tensor::to_vector<Float8E4M3>() const;
template std::vector<Float8E5M2> Tensor::to_vector<Float8E5M2>() const;

std::string Tensor::str() const {
  if (!impl_) return "Tensor(undefined)";
  return fmt::format("Tensor({}, {}, {})", dtype_name(dtype()), device().str(), shape_str(shape()));
}

bool Tensor::requires_grad() const { return impl_ && impl_->autograd && impl_->autograd->requires_grad; }

Tensor& Tensor::requires_grad_(bool enabled) {
  check_defined("requires_grad_");
  if (enabled && !is_floating(dtype()))
    throw Error(fmt::format("Tensor::requires_grad_: only floating tensors can require grad, got {}",
                            dtype_name(dtype())));
  if (!is_leaf())
    throw Error("Tensor::requires_grad_: only leaves can be marked; this tensor was computed by a recorded op");
  ensure_autograd_meta().requires_grad = enabled;
  return *this;
}

bool Tensor::is_leaf() const { return !impl_ || !impl_->autograd || !impl_->autograd->grad_fn; }

Tensor Tensor::grad() const {
  return impl_ && impl_->autograd ? impl_->autograd->grad : Tensor();
}

void Tensor::set_grad(const Tensor& grad) const {
  check_defined("set_grad");
  if (grad.defined() && (grad.shape() != shape() || grad.device() != device()))
    throw Error(fmt::format("Tensor::set_grad: grad {} does not match the tensor {}", grad.str(), str()));
  ensure_autograd_meta().grad = grad;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> none;
  return impl_ && impl_->autograd ? impl_->autograd->grad_fn : none;
}

AutogradMeta* Tensor::autograd_meta() const { return impl_ ? impl_->autograd.get() : nullptr; }

AutogradMeta& Tensor::ensure_autograd_meta() const {
  check_defined("autograd_meta");
  if (!impl_->autograd) impl_->autograd = std::make_shared<AutogradMeta>();
  return *impl_->autograd;
}

HookHandle Tensor::add_grad_ready_hook(std::function<void(Tensor&)> hook) const {
  if (!requires_grad() || !is_leaf())
    throw Error(fmt::format("Tensor::add_grad_ready_hook: hooks go on leaves that require grad, got {}", str()));
  return ensure_autograd_meta().grad_ready_hooks.add(std::move(hook));
}

void Tensor::set_data(const Tensor& other) const {
  check_defined("set_data");
  other.check_defined("set_data");
  const bool same_kind = other.shape() == shape() && other.dtype() == dtype() && other.device() == device();
  impl_->storage = other.impl_->storage;
  impl_->shape = other.impl_->shape;
  impl_->strides = other.impl_->strides;
  impl_->offset = other.impl_->offset;
  impl_->dtype = other.impl_->dtype;
  if (!same_kind && impl_->autograd) impl_->autograd->grad = Tensor();  // a stale grad would no longer fit
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) {
  out << t.str();
  if (!t.defined() || t.numel() > 64) return out;
  const Tensor values = nograd::contiguous(nograd::to_device(t, Device::cpu()));
  out << " [";
  dispatch_all(t.dtype(), "print", [&]<class T>() {
    const T* p = static_cast<const T*>(values.data_ptr());
    for (int64_t i = 0; i < values.numel(); ++i) {
      if (i) out << ", ";
      if constexpr (is_narrow_float_v<T>) out << static_cast<float>(p[i]);
      else out << +p[i];
    }
  });
  return out << "]";
}

}  // namespace accel
