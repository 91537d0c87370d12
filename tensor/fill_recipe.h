// FillRecipe: what one initialiser writes into a tensor, as a pure function of the element index: a
// constant, a Philox draw fixed by (seed, offset) and its formula, or the elements of a tensor held
// elsewhere (a file's). Any run of a fill's elements, computed alone, equals those elements of the
// whole fill bit for bit; deferred init relies on it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace accel {

// Values that come from elsewhere, read on demand: a pretrained file's tensor loaded into a model
// built under DeferredInit, so that materialising reads only the elements it keeps.
struct ElementSource {
  // Elements [first, first + count) of the source tensor, row-major, as a 1-D tensor of any dtype on
  // any device.
  std::function<Tensor(int64_t first, int64_t count)> read;
  uint64_t fingerprint = 0;  // equal on ranks that read the same tensor (deferred init compares them)
  std::string description;   // for messages: "'fc.weight' of /data/model.safetensors"
};

// What ranks loading the same tensor agree on: its name, shape and dtype (where it comes from, a path
// or an address, may differ from rank to rank).
uint64_t element_source_fingerprint(const std::string& name, const Shape& shape, DType dtype);
// The elements of values, a tensor in memory with data (not meta), which the source holds (it is
// read when the recipe is materialised, not copied now). name is its key; origin says where it came
// from, for messages.
std::shared_ptr<ElementSource> tensor_element_source(const Tensor& values, const std::string& name,
                                                     const std::string& origin);

struct FillRecipe {
  enum class Kind { constant, uniform, normal, source };
  Kind kind = Kind::constant;
  double a = 0;         // constant: the value; uniform: low; normal: mean
  double b = 0;         // uniform: high; normal: std
  bool affine = false;  // normal: x * std + mean in the tensor's dtype (nn::init::normal_); else randn's x
  uint64_t seed = 0;
  uint64_t offset = 0;  // the draw's first Philox block
  std::shared_ptr<const ElementSource> source;  // Kind::source: where the values are read

  static FillRecipe constant(double value);
  // The draws of numel elements that gen gives next; gen moves on as the draw moves it. op names the
  // caller in errors (low > high).
  static FillRecipe uniform(double low, double high, uint64_t numel, Generator& gen, const char* op = "uniform");
  static FillRecipe standard_normal(uint64_t numel, Generator& gen);
  static FillRecipe normal(double mean, double std, uint64_t numel, Generator& gen);
  // The elements of source, in the tensor's row-major order.
  static FillRecipe from_source(std::shared_ptr<const ElementSource> source);

  bool is_constant() const { return kind == Kind::constant; }
  // Elements [first, first + numel(shape)) of the fill, row-major, as a contiguous tensor of shape
  // (a source's may share its reader's memory). Draws are made on the host in f32 and cast, so every
  // device and dtype sees one stream.
  Tensor values(const Shape& shape, int64_t first, DType dtype, Device device) const;
  // For messages: "normal(0, 0.02) at Philox seed 7 block 12", "the elements of 'w' of model.safetensors".
  std::string str() const;
};

}  // namespace accel
