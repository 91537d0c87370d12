// The foundation MLP the data-parallel benches time: 784-1024-1024-10 with ReLUs, f32, its weights
// from Generator(0), so every rank and every bench builds the same model.
#pragma once

#include <memory>

#include <accel.h>

inline std::shared_ptr<accel::nn::Sequential> make_foundation_mlp() {
  accel::Generator gen(0);
  auto model = std::make_shared<accel::nn::Sequential>();
  model->push_back(std::make_shared<accel::nn::Linear>(784, 1024, true, gen));
  model->push_back(std::make_shared<accel::nn::ReLU>());
  model->push_back(std::make_shared<accel::nn::Linear>(1024, 1024, true, gen));
  model->push_back(std::make_shared<accel::nn::ReLU>());
  model->push_back(std::make_shared<accel::nn::Linear>(1024, 10, true, gen));
  return model;
}
