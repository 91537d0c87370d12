// tests/zero's odd-sized model, shared by the doctest suite and the zero_resume program: 7 -> 13 -> 5 -> 3
// with tanh, parameters of 91, 13, 65, 5, 15 and 3 elements, which no world size divides, so ZeRO's
// slices start and end mid-row.
#pragma once

#include <cstdint>
#include <memory>

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

}  // namespace test
