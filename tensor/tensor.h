// Tensor: a cheap, shared handle to a strided view of a Storage, with its dtype, device and the
// autograd metadata that the autograd layer fills in. Ops are free functions (see tensor/nograd/).
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/hook_list.h"
#include "tensor/shape.h"
#include "tensor/storage.h"

namespace accel {

namespace autograd {
class Node;
}

class Tensor;
struct AutogradMeta;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Strides strides;
  int64_t offset = 0;  // in elements
  DType dtype = DType::f32;
  std::shared_ptr<AutogradMeta> autograd;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  // A view with the given layout over existing storage.
  static Tensor make_view(std::shared_ptr<Storage> storage, Shape shape, Strides strides, int64_t offset,
                          DType dtype);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  int64_t size(int64_t dim) const;  // negative dims count from the end
  const Strides& strides() const;
  int64_t stride(int64_t dim) const;
  int64_t offset() const;
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  bool is_contiguous() const;
  // numel() x the element size; throws when that does not fit in int64 (a stride-0 view can count more
  // elements than memory could hold).
  size_t nbytes() const;

  const std::shared_ptr<Storage>& storage() const;
  void* data_ptr() const;  // first element of this view (a device pointer on CUDA)
  // A meta tensor has a shape, dtype and device but no data yet: made under DeferredInit
  // (tensor/deferred_init.h), its values are a recipe until it is materialised.
  bool is_meta() const { return impl_ && impl_->storage && impl_->storage->is_meta(); }
  template <class T>
  T* data() const {
    check_dtype_for_access(dtype_of<T>());
    return static_cast<T*>(data_ptr());
  }

  // The single value of a one-element tensor as double (copied from the device if needed).
  double item() const;
  // The elements in row-major order, copied to the host; T must match the dtype.
  template <class T>
  std::vector<T> to_vector() const;

  std::string str() const;  // "Tensor(f32, cpu, [2, 3])"
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  // True when nothing else can reach this tensor's data: this is the only handle to its impl and the
  // impl the only view of its storage. Lets a consumer keep a temporary's buffer instead of copying it.
  bool is_sole_owner() const { return impl_.use_count() == 1 && impl_->storage.use_count() == 1; }
  TensorImpl* impl() const { return impl_.get(); }

  // Autograd metadata; the autograd layer gives it meaning.
  bool requires_grad() const;
  // Marks a leaf as a trainable input; only floating dtypes can require grad.
  Tensor& requires_grad_(bool enabled = true);
  bool is_leaf() const;
  Tensor grad() const;
  void set_grad(const Tensor& grad) const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  AutogradMeta* autograd_meta() const;
  AutogradMeta& ensure_autograd_meta() const;
  // Calls hook(leaf) each time backward has finished accumulating into this leaf's grad. The handle
  // removes it again.
  HookHandle add_grad_ready_hook(std::function<void(Tensor&)> hook) const;

  // Replaces this tensor's data and layout with other's, keeping its identity and autograd metadata,
  // so that every handle (an optimizer's, say) sees the moved or cast parameter.
  void set_data(const Tensor& other) const;

 private:
  void check_defined(const char* what) const;
  void check_dtype_for_access(DType requested) const;
  std::shared_ptr<TensorImpl> impl_;
};

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;  // set on outputs of recorded ops
  uint32_t output_nr = 0;                   // which output of grad_fn this tensor is
  std::weak_ptr<autograd::Node> grad_accumulator;  // leaves: the node that accumulates into grad
  HookList<void(Tensor&)> grad_ready_hooks;
};

// Prints dtype, device, shape and (for small tensors) the values.
std::ostream& operator<<(std::ostream& out, const Tensor& tensor);

extern template std::vector<double> Tensor::to_vector<double>() const;
extern template std::vector<float> Tensor::to_vector<float>() const;
extern template std::vector<Half> Tensor::to_vector<Half>() const;
extern template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;
extern template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
extern template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
extern template std::vector<bool> Tensor::to_vector<bool>() const;
extern template std::vector<Float8E4M3> Tensor::to_vector<Float8E4M3>() const;
extern template std::vector<Float8E5M2> Tensor::to_vector<Float8E5M2>() const;

}  // namespace accel
