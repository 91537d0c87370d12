// Parameter-free activation modules, so Sequential can hold them: ReLU, GELU (tanh form), Tanh.
#pragma once

#include "nn/module.h"

namespace accel::nn {

class ReLU : public Module {
 public:
  std::string type_name() const override { return "ReLU"; }

 protected:
  Tensor forward_impl(const Tensor& x) override;
};

// The tanh approximation, as GPT-2 uses.
class GELU : public Module {
 public:
  std::string type_name() const override { return "GELU"; }

 protected:
  Tensor forward_impl(const Tensor& x) override;
};

class Tanh : public Module {
 public:
  std::string type_name() const override { return "Tanh"; }

 protected:
  Tensor forward_impl(const Tensor& x) override;
};

}  // namespace accel::nn
