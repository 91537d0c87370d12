// nn::Module's hooks: forward-pre and forward hooks around every call of a module (however it is
// called), a forward hook that replaces the output, backward hooks once all of a module's parameter
// grads are ready, and removal through the handles.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "accel.h"

using namespace accel;
using namespace accel::nn;

namespace {

GPT tiny_gpt(Generator& gen) { return GPT({.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 8}, gen); }

Tensor tokens() { return from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3}); }

}  // namespace

TEST_CASE("forward hooks run around forward_impl however the module is called, in the order added") {
  Generator gen(0);
  Linear lin(3, 2, true, gen);
  std::vector<std::string> log;
  HookHandle pre = lin.register_forward_pre_hook([&](Module& m, const Tensor& x) {
    log.push_back("pre " + m.type_name() + " " + shape_str(x.shape()));
  });
  HookHandle post = lin.register_forward_hook([&](Module&, const Tensor&, Tensor& out) {
    log.push_back("post " + shape_str(out.shape()));
  });
  lin.register_forward_hook([&](Module&, const Tensor&, Tensor&) { log.push_back("post 2"); });
  lin(ones({4, 3}));
  lin.forward(ones({1, 3}));
  CHECK(log == std::vector<std::string>{"pre Linear [4, 3]", "post [4, 2]", "post 2", "pre Linear [1, 3]",
                                        "post [1, 2]", "post 2"});
  pre.remove();
  post.remove();
  log.clear();
  lin(ones({1, 3}));
  CHECK(log == std::vector<std::string>{"post 2"});
}

TEST_CASE("a forward hook may replace the output, and the replacement is what the caller gets") {
  Generator gen(0);
  Linear lin(3, 2, true, gen);
  const Tensor x = ones({1, 3});
  const std::vector<float> plain = lin(x).to_vector<float>();
  lin.register_forward_hook([](Module&, const Tensor&, Tensor& out) { out = out * 2.0; });
  const std::vector<float> doubled = lin(x).to_vector<float>();
  REQUIRE(doubled.size() == plain.size());
  for (size_t i = 0; i < plain.size(); ++i) CHECK(doubled[i] == plain[i] * 2.0f);
}

TEST_CASE("a parent's forward runs each child's hooks: a GPT's blocks are visited in order, once per call") {
  Generator gen(0);
  GPT gpt = tiny_gpt(gen);
  std::vector<std::string> log;
  for (const auto& [name, m] : gpt.named_modules()) {
    if (m->type_name() != "GPTBlock") continue;
    const std::string n = name;
    m->register_forward_pre_hook([&log, n](Module&, const Tensor&) { log.push_back("enter " + n); });
    m->register_forward_hook([&log, n](Module&, const Tensor&, Tensor&) { log.push_back("leave " + n); });
  }
  gpt.forward(tokens());
  CHECK(log == std::vector<std::string>{"enter blocks.0", "leave blocks.0", "enter blocks.1", "leave blocks.1"});
}

TEST_CASE("backward hooks fire once per pass when all of a module's parameter grads are ready, last block first") {
  Generator gen(0);
  GPT gpt = tiny_gpt(gen);
  std::vector<std::string> log;
  std::vector<HookHandle> handles;
  for (const auto& [name, m] : gpt.named_modules()) {
    if (m->type_name() != "GPTBlock") continue;
    const std::string n = name;
    handles.push_back(m->register_backward_hook([&log, n, m = m](Module& fired) {
      CHECK(&fired == m);
      // Every parameter of the block has its grad by now.
      for (const Tensor& p : fired.parameters()) CHECK(p.grad().defined());
      log.push_back(n);
    }));
  }
  backward(sum(gpt.forward(tokens())));
  CHECK(log == std::vector<std::string>{"blocks.1", "blocks.0"});
  backward(sum(gpt.forward(tokens())));
  CHECK(log == std::vector<std::string>{"blocks.1", "blocks.0", "blocks.1", "blocks.0"});
  handles[0].remove();
  backward(sum(gpt.forward(tokens())));
  CHECK(log.size() == 5);
  CHECK(log.back() == "blocks.1");
}

TEST_CASE("a backward pass that leaves a parameter without a grad does not fire, nor count towards the next") {
  Generator gen(0);
  Linear lin(2, 2, true, gen);
  int fired = 0;
  lin.register_backward_hook([&](Module&) { ++fired; });
  // Only the bias gets a grad: the weight is detached from the graph.
  backward(sum(linear(ones({1, 2}), detach(lin.weight()), lin.bias())));
  CHECK(fired == 0);
  // Only the weight: together with the pass before it would make two, but the passes differ.
  backward(sum(linear(ones({1, 2}), lin.weight(), Tensor())));
  CHECK(fired == 0);
  backward(sum(lin(ones({1, 2}))));
  CHECK(fired == 1);
}

TEST_CASE("a module without parameters refuses a backward hook; hooks on parameters die with their module") {
  ReLU relu_module;
  CHECK_THROWS_WITH_AS(relu_module.register_backward_hook([](Module&) {}),
                       "ReLU::register_backward_hook: the module has no parameters, so no grad would fire it", Error);
  Generator gen(0);
  Tensor weight;
  HookHandle handle;
  int fired = 0;
  {
    Linear lin(2, 2, false, gen);
    weight = lin.weight();
    handle = lin.register_backward_hook([&](Module&) { ++fired; });
  }
  // The parameter outlived its module, whose destructor took the hook off it.
  backward(sum(weight * 1.0));
  CHECK(fired == 0);
  handle.remove();  // harmless now
}
