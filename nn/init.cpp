// In-place initialisers: draw in the tensor's dtype and device, then copy into it under no-grad. On a
// meta tensor (built under DeferredInit) each records its FillRecipe instead, after moving the
// generator on exactly as the draw would, so a later materialisation gives the same values.
#include "nn/init.h"

#include "autograd/grad_mode.h"
#include "tensor/fill_recipe.h"
#include "tensor/meta_tensor.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"

namespace accel::nn::init {

namespace {

void write(const Tensor& t, const FillRecipe& fill) {
  if (t.is_meta()) return record_fill(t, fill);
  NoGradGuard no_grad;
  if (!fill.is_constant()) nograd::copy_(t, fill.values(t.shape(), 0, t.dtype(), t.device()));
  else nograd::fill_(t, fill.a);
}

uint64_t numel_of(const Tensor& t) { return static_cast<uint64_t>(t.numel()); }

}  // namespace

void uniform_(const Tensor& t, double low, double high, Generator& gen) {
  write(t, FillRecipe::uniform(low, high, numel_of(t), gen, "init::uniform_"));
}

void normal_(const Tensor& t, double mean, double std, Generator& gen) {
  write(t, FillRecipe::normal(mean, std, numel_of(t), gen));
}

void zeros_(const Tensor& t) { write(t, FillRecipe::constant(0.0)); }

void ones_(const Tensor& t) { write(t, FillRecipe::constant(1.0)); }

}  // namespace accel::nn::init
