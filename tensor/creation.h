// Tensor creation: empty, zeros, ones, full, arange, random draws and tensors from host vectors.
#pragma once

#include <vector>

#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace accel {

Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
Tensor full(const Shape& shape, double value, DType dtype = DType::f32, Device device = Device::cpu());
// A 0-d tensor holding value.
Tensor scalar_tensor(double value, DType dtype = DType::f32, Device device = Device::cpu());
Tensor empty_like(const Tensor& like);
Tensor zeros_like(const Tensor& like);
Tensor ones_like(const Tensor& like);
Tensor full_like(const Tensor& like, double value);

// start, start + step, ... up to but excluding end.
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::i64, Device device = Device::cpu());
Tensor arange(int64_t end, DType dtype = DType::i64, Device device = Device::cpu());

// Standard normal / uniform [0, 1) draws from gen's stream.
Tensor randn(const Shape& shape, Generator& gen, DType dtype = DType::f32, Device device = Device::cpu());
Tensor rand(const Shape& shape, Generator& gen, DType dtype = DType::f32, Device device = Device::cpu());
// Uniform [low, high).
Tensor uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype = DType::f32,
               Device device = Device::cpu());
// randn's draw times std plus mean, both in dtype (nn::init::normal_'s values).
Tensor normal(const Shape& shape, double mean, double std, Generator& gen, DType dtype = DType::f32,
              Device device = Device::cpu());
// Under DeferredInit (tensor/deferred_init.h) every function above but arange and from_vector makes
// a meta tensor: its shape, and the recipe of these values, without data.

// Copies values (row-major) into a new tensor of the matching dtype; numel must equal values.size().
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device = Device::cpu());
// A 1-d tensor.
template <class T>
Tensor from_vector(const std::vector<T>& values, Device device = Device::cpu()) {
  return from_vector(values, Shape{static_cast<int64_t>(values.size())}, device);
}

extern template Tensor from_vector<double>(const std::vector<double>&, const Shape&, Device);
extern template Tensor from_vector<float>(const std::vector<float>&, const Shape&, Device);
extern template Tensor from_vector<Half>(const std::vector<Half>&, const Shape&, Device);
extern template Tensor from_vector<BFloat16>(const std::vector<BFloat16>&, const Shape&, Device);
extern template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&, Device);
extern template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&, Device);
extern template Tensor from_vector<bool>(const std::vector<bool>&, const Shape&, Device);
extern template Tensor from_vector<Float8E4M3>(const std::vector<Float8E4M3>&, const Shape&, Device);
extern template Tensor from_vector<Float8E5M2>(const std::vector<Float8E5M2>&, const Shape&, Device);

}  // namespace accel
