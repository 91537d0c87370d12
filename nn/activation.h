// Parameter-free activation modules, so Sequential can hold them: ReLU, GELU (tanh form), Tanh.
#pragma once

#include "nn/module.h"

namespace accel::nn {

class ReLU : public Module {
 public:
  std::string type_name() const override { return "ReLU"; }
  Tensor forward(const Tensor& x) override;
};

// The tanh approximation, as GPT-2 uses.
class GELU : public Module {
 public:
  std::string type_name() const override { return "GELU"; }
  Tensor forward(const Tensor& x) override;
};

class Tanh : public Module {
 public:
  std::string type_name() const override { return "Tanh"; }
  Tensor forward(const Tensor& x) override;
};

}  // namespace accel::nn
