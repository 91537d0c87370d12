// nn::Sequential: single-input modules applied in order, registered as "0", "1", ...
#pragma once

#include <memory>

#include "nn/module.h"

namespace accel::nn {

class Sequential : public Module {
 public:
  Sequential() = default;

  std::string type_name() const override { return "Sequential"; }

  // Appends module under the next index and returns it, typed.
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    register_module(std::to_string(size()), module);
    return module;
  }
  size_t size() const { return children().size(); }
  Module& operator[](size_t index) const;

 protected:
  Tensor forward_impl(const Tensor& x) override;
};

}  // namespace accel::nn
