// In-place initialisers for parameters: they overwrite a tensor's values without recording a graph,
// keeping its identity, as module constructors and model-specific init schemes need. On a meta tensor
// (DeferredInit) they record what they would write, and move the generator on all the same.
#pragma once

#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace accel::nn::init {

void uniform_(const Tensor& t, double low, double high, Generator& gen);
void normal_(const Tensor& t, double mean, double std, Generator& gen);
void zeros_(const Tensor& t);
void ones_(const Tensor& t);

}  // namespace accel::nn::init
