// Meta tensors: a shape, dtype and device with no data, and the recipe of the values an init would
// have written into them (DeferredInit makes them). Materialising a run of a meta tensor's elements
// computes just those values, equal bit for bit to the same elements of a full init.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/fill_recipe.h"
#include "tensor/tensor.h"

namespace accel {

// The initialisers recorded on one meta storage, in order: each a FillRecipe over the region of the
// storage it wrote (the whole tensor, or a view such as a narrowed row range). An element holds
// what the last step covering it wrote, as eager writes in that order would leave it.
class InitRecipe {
 public:
  struct Step {
    Shape shape;  // the region, as a view's layout over the storage's elements
    Strides strides;
    int64_t offset = 0;
    FillRecipe fill;
  };

  InitRecipe(DType dtype, int64_t numel) : dtype_(dtype), numel_(numel) {}
  DType dtype() const { return dtype_; }
  int64_t numel() const { return numel_; }
  const std::vector<Step>& steps() const { return steps_; }
  void add(Step step);

  // "" when a step covers every storage element of [first, first + count), else which elements no
  // initialiser wrote (a tensor made with empty() and never initialised).
  std::string uncovered(int64_t first, int64_t count) const;
  // Writes storage elements [first, first + dst.numel()) into dst, a contiguous tensor of the
  // recipe's dtype on any device. Every element must be covered (see uncovered).
  void write(int64_t first, const Tensor& dst) const;
  // A hash of the steps (their regions, formulas and Philox positions): ranks that built the same
  // model from the same seed have the same fingerprints.
  uint64_t fingerprint() const;

 private:
  void write_strided_step(const Step& step, int64_t first, const Tensor& dst) const;

  DType dtype_;
  int64_t numel_;
  std::vector<Step> steps_;
};

// A new contiguous meta tensor whose recipe has no steps yet (what empty() makes under DeferredInit).
// The sizes are checked as an allocation's would be; op names the caller.
Tensor make_meta(const char* op, const Shape& shape, DType dtype, Device device);
// Records that fill writes every element of t, a meta tensor or a view of one.
void record_fill(const Tensor& t, const FillRecipe& fill);
// Writes elements [first, first + dst.numel()) of the contiguous meta tensor t (row-major) into dst,
// a contiguous tensor of t's dtype: a rank's run of a parameter, computed without the rest of it.
void materialize_run(const Tensor& t, int64_t first, const Tensor& dst);
// Gives a meta tensor's storage its bytes and writes the recipe's values into them, so every view
// of it (other handles, a tied weight) sees them; a tensor that is not meta is left alone. name is
// for the error when some element has no initialiser.
void materialize_in_place(const Tensor& t, const std::string& name = "");
// The meta tensor with t's layout and recipe on device: moving costs nothing, there is no data.
Tensor meta_to_device(const Tensor& t, Device device);

}  // namespace accel
