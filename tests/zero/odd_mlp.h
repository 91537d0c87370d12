// tests/zero's odd-sized model, shared by the doctest suite and the zero_resume program: 7 -> 13 -> 5 -> 3
// with tanh, parameters of 91, 13, 65, 5, 15 and 3 elements, which no world size divides, so ZeRO's
// slices start and end mid-row; and the same with parameters that some steps give no grad.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "accel.h"

namespace test {

inline std::shared_ptr<accel::nn::Sequential> make_odd_mlp(uint64_t seed) {
  using namespace accel;
  Generator gen(seed);
  auto mlp = std::make_shared<nn::Sequential>();
  mlp->push_back(std::make_shared<nn::Linear>(7, 13, true, gen));
  mlp->push_back(std::make_shared<nn::Tanh>());
  mlp->push_back(std::make_shared<nn::Linear>(13, 5, true, gen));
  mlp->push_back(std::make_shared<nn::Tanh>());
  mlp->push_back(std::make_shared<nn::Linear>(5, 3, true, gen));
  return mlp;
}

// The odd-sized model, then a Linear(3, 3) branch added to its output while use_branch is set, and a
// spare Linear(3, 2) that no forward uses: parameters that get no grad on some steps, on some ranks,
// or ever.
struct GatedOddMlp : accel::nn::Module {
  explicit GatedOddMlp(uint64_t seed) {
    accel::Generator gen(seed + 1000);
    body = register_module("body", make_odd_mlp(seed));
    branch = register_module("branch", std::make_shared<accel::nn::Linear>(3, 3, true, gen));
    spare = register_module("spare", std::make_shared<accel::nn::Linear>(3, 2, true, gen));
  }
  std::string type_name() const override { return "GatedOddMlp"; }
  accel::Tensor forward_impl(const accel::Tensor& x) override {
    const accel::Tensor y = (*body)(x);
    return use_branch ? accel::add(y, (*branch)(y)) : y;
  }

  std::shared_ptr<accel::nn::Sequential> body;
  std::shared_ptr<accel::nn::Linear> branch, spare;
  bool use_branch = true;
};

}  // namespace test
