// Deferred init through a one-process Accelerator: prepare materialises a model built under
// init_empty_weights whole (the single-device strategy keeps every parameter), to the values of a
// normal build, keeps the optimizer's handles, and works when called inside the scope too.
#include <doctest/doctest.h>

#include <cstring>

#include "accel.h"

using namespace accel;

namespace {

std::vector<float> values_of(const nn::Module& model) {
  std::vector<float> out;
  for (const Tensor& p : model.parameters())
    for (float v : p.to_vector<float>()) out.push_back(v);
  return out;
}

std::shared_ptr<nn::GPT> make_gpt(Generator& gen) {
  return std::make_shared<nn::GPT>(
      nn::GPTConfig{.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 8, .tie_weights = true}, gen);
}

AcceleratorOptions quiet() {
  AcceleratorOptions o;
  o.print_settings = false;
  return o;
}

}  // namespace

TEST_CASE("prepare materialises a deferred-init model whole on one process, to the normal build's values") {
  Generator normal_gen(9), deferred_gen(9);
  const auto normal = make_gpt(normal_gen);
  std::shared_ptr<nn::GPT> model;
  {
    auto scope = init_empty_weights();
    model = make_gpt(deferred_gen);
  }
  auto adamw = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{});
  Accelerator accelerator(quiet());
  auto [net, opt] = accelerator.prepare(model, adamw);
  CHECK(nn::first_meta_tensor(*net).empty());
  CHECK(values_of(*net) == values_of(*normal));
  for (const Tensor& p : opt->params()) CHECK_FALSE(p.is_meta());
  // It trains: one step runs and moves the weights.
  const Tensor tokens = from_vector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8}, {1, 8});
  accelerator.backward(net->loss(tokens, tokens));
  opt->step();
  CHECK(values_of(*net) != values_of(*normal));
}

TEST_CASE("prepare called inside the DeferredInit scope still gives real tensors") {
  Generator normal_gen(4), deferred_gen(4);
  const auto normal = make_gpt(normal_gen);
  auto scope = init_empty_weights();
  auto model = make_gpt(deferred_gen);
  Accelerator accelerator(quiet());
  auto net = accelerator.prepare(model);
  CHECK(values_of(*net) == values_of(*normal));
}
