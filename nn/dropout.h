// nn::Dropout: zeroes elements with probability p while training; the identity in eval mode.
#pragma once

#include "nn/module.h"
#include "tensor/generator.h"

namespace accel::nn {

class Dropout : public Module {
 public:
  // Owns a Generator seeded from gen, so its masks do not depend on what else draws from gen.
  Dropout(double p, Generator& gen);

  std::string type_name() const override { return "Dropout"; }

  double p() const { return p_; }
  // Its stream, for checkpoints that must resume the same masks.
  Generator& generator() { return gen_; }

 protected:
  Tensor forward_impl(const Tensor& x) override;

 private:
  double p_;
  Generator gen_;
};

}  // namespace accel::nn
