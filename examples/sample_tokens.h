// sample_tokens: a GPT's continuation of a start token, drawn one token at a time from the softmax of
// the last position's logits. Shared by char_gpt and train_gpt2.
#pragma once

#include <algorithm>
#include <vector>

#include <accel.h>

// count tokens after start_id, at temperature. Every rank runs it (a sharded or tensor-parallel
// model's forward is collective) with the same generator, so every rank draws the same tokens. The
// caller puts the model in eval mode (and any autocast) around it.
inline std::vector<int64_t> sample_tokens(accel::nn::GPT& model, int64_t start_id, int64_t count, double temperature,
                                          accel::Generator& gen, accel::Device device) {
  using namespace accel;
  NoGradGuard no_grad;
  std::vector<int64_t> context{start_id};
  for (int64_t i = 0; i < count; ++i) {
    const int64_t t = std::min<int64_t>(static_cast<int64_t>(context.size()), model.config().block_size);
    const Tensor idx = to(from_vector(std::vector<int64_t>(context.end() - t, context.end()), {1, t}), device);
    const Tensor logits = to_dtype(select(select(model.forward(idx), 0, 0), 0, t - 1), DType::f32);
    const std::vector<float> probs = to(softmax(logits / temperature, 0), Device::cpu()).to_vector<float>();
    const float u = rand({1}, gen).to_vector<float>()[0];
    float cumulative = 0;
    int64_t next = static_cast<int64_t>(probs.size()) - 1;
    for (size_t k = 0; k < probs.size(); ++k) {
      cumulative += probs[k];
      if (u < cumulative) {
        next = static_cast<int64_t>(k);
        break;
      }
    }
    context.push_back(next);
  }
  return {context.begin() + 1, context.end()};
}
