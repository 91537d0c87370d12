// nn::MLP: the transformer's position-wise feed-forward block, fc -> GELU -> proj -> dropout.
#pragma once

#include <memory>

#include "nn/activation.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace accel::nn {

class MLP : public Module {
 public:
  // fc widens n_embd to 4 n_embd, proj narrows it back.
  MLP(int64_t n_embd, double dropout, Generator& gen);

  std::string type_name() const override { return "MLP"; }

  const std::shared_ptr<Linear>& fc() const { return fc_; }
  const std::shared_ptr<Linear>& proj() const { return proj_; }
  const std::shared_ptr<Dropout>& drop() const { return drop_; }

 protected:
  Tensor forward_impl(const Tensor& x) override;

 private:
  std::shared_ptr<Linear> fc_;
  std::shared_ptr<GELU> act_;
  std::shared_ptr<Linear> proj_;
  std::shared_ptr<Dropout> drop_;
};

}  // namespace accel::nn
