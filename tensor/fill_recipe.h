// FillRecipe: what one initialiser writes into a tensor, as a pure function of the element index: a
// constant, or a Philox draw fixed by (seed, offset) and its formula. Any run of a draw's elements,
// computed alone, equals those elements of the whole draw bit for bit; deferred init relies on it.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace accel {

struct FillRecipe {
  enum class Kind { constant, uniform, normal };
  Kind kind = Kind::constant;
  double a = 0;         // constant: the value; uniform: low; normal: mean
  double b = 0;         // uniform: high; normal: std
  bool affine = false;  // normal: x * std + mean in the tensor's dtype (nn::init::normal_); else randn's x
  uint64_t seed = 0;
  uint64_t offset = 0;  // the draw's first Philox block

  static FillRecipe constant(double value);
  // The draws of numel elements that gen gives next; gen moves on as the draw moves it. op names the
  // caller in errors (low > high).
  static FillRecipe uniform(double low, double high, uint64_t numel, Generator& gen, const char* op = "uniform");
  static FillRecipe standard_normal(uint64_t numel, Generator& gen);
  static FillRecipe normal(double mean, double std, uint64_t numel, Generator& gen);

  bool is_random() const { return kind != Kind::constant; }
  // Elements [first, first + numel(shape)) of the fill, row-major, as a new contiguous tensor of
  // shape. Draws are made on the host in f32 and cast, so every device and dtype sees one stream.
  Tensor values(const Shape& shape, int64_t first, DType dtype, Device device) const;
  // For messages: "normal(0, 0.02) at Philox seed 7 block 12".
  std::string str() const;
};

}  // namespace accel
