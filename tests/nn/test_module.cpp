// nn::Module: dotted names and their order, registration checks, state dicts, mode switches, zero_grad
// and in-place moves.
#include <doctest/doctest.h>

#include "accel.h"

using namespace accel;
using namespace accel::nn;

namespace {

std::vector<std::string> names(const StateDict& state) {
  std::vector<std::string> out;
  for (const auto& entry : state) out.push_back(entry.first);
  return out;
}

// A leaf module with a parameter and a buffer, and a parent holding two of them around its own.
struct Leaf : Module {
  Leaf() {
    register_parameter("w", zeros({2}));
    register_buffer("count", zeros({1}, DType::i64));
  }
  std::string type_name() const override { return "Leaf"; }
};

struct Parent : Module {
  std::shared_ptr<Leaf> a, b;
  Parent() {
    a = register_module("a", std::make_shared<Leaf>());
    register_parameter("scale", ones({3}));
    b = register_module("b", std::make_shared<Leaf>());
    register_buffer("stats", zeros({3}));
  }
  std::string type_name() const override { return "Parent"; }
};

std::vector<float> values(const Tensor& t) { return contiguous(t).to_vector<float>(); }

}  // namespace

TEST_CASE("names are dotted and ordered: own entries first, then each child's, in registration order") {
  Parent p;
  CHECK(names(p.named_parameters()) == std::vector<std::string>{"scale", "a.w", "b.w"});
  CHECK(names(p.named_buffers()) == std::vector<std::string>{"stats", "a.count", "b.count"});
  CHECK(names(p.state_dict()) == std::vector<std::string>{"scale", "a.w", "b.w", "stats", "a.count", "b.count"});
  std::vector<std::string> modules;
  for (const auto& [name, m] : p.named_modules()) modules.push_back(name + ":" + m->type_name());
  CHECK(modules == std::vector<std::string>{":Parent", "a:Leaf", "b:Leaf"});
  // The handles are the live parameters, marked for training.
  CHECK(p.parameters()[1].is_same(p.a->named_parameters()[0].second));
  CHECK(p.parameters()[1].requires_grad());
  CHECK_FALSE(p.named_buffers()[0].second.requires_grad());
}

TEST_CASE("a GPT with 2 blocks lists exactly the parameter names checkpoints use") {
  Generator gen(0);
  GPT gpt({.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 8}, gen);
  std::vector<std::string> expected{"wte.weight", "wpe.weight"};
  for (const char* block : {"blocks.0", "blocks.1"})
    for (const char* leaf :
         {"ln_1.weight", "ln_1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias",
          "ln_2.weight", "ln_2.bias", "mlp.fc.weight", "mlp.fc.bias", "mlp.proj.weight", "mlp.proj.bias"})
      expected.push_back(std::string(block) + "." + leaf);
  for (const char* tail : {"ln_f.weight", "ln_f.bias", "lm_head.weight"}) expected.push_back(tail);
  const StateDict params = gpt.named_parameters();
  CHECK(names(params) == expected);
  CHECK(names(gpt.state_dict()) == expected);  // no buffers
  CHECK(params[0].second.shape() == Shape{11, 8});
  CHECK(params[4].second.shape() == Shape{24, 8});  // blocks.0.attn.qkv.weight
  CHECK(params.back().second.shape() == Shape{11, 8});
}

TEST_CASE("registration rejects clashing, dotted and empty names, non-leaves and integer parameters") {
  Parent p;
  CHECK_THROWS_WITH_AS(p.register_parameter("a", zeros({1})),
                       "register_parameter: Parent already has an entry named 'a'", Error);
  CHECK_THROWS_WITH_AS(p.register_buffer("stats", zeros({1})),
                       "register_buffer: Parent already has an entry named 'stats'", Error);
  CHECK_THROWS_WITH_AS(p.register_module("x.y", std::make_shared<Leaf>()),
                       "register_module: name 'x.y' must be non-empty and contain no '.'", Error);
  CHECK_THROWS_WITH_AS(p.register_parameter("", zeros({1})),
                       "register_parameter: name '' must be non-empty and contain no '.'", Error);
  CHECK_THROWS_WITH_AS(p.register_parameter("idx", zeros({1}, DType::i64)),
                       "register_parameter: 'idx' is i64, expected a floating dtype", Error);
  Tensor leaf = ones({2}).requires_grad_();
  CHECK_THROWS_WITH_AS(p.register_parameter("derived", leaf * 2.0),
                       "register_parameter: 'derived' was computed by a recorded op; register a leaf (detach it)",
                       Error);
  CHECK_THROWS_WITH_AS(p.forward(leaf), "Parent::forward: this module does not take a single tensor input", Error);
}

TEST_CASE("a state_dict round trip restores values into the same tensors") {
  Generator gen(1);
  Sequential src, dst;
  src.push_back(std::make_shared<Linear>(3, 4, true, gen));
  src.push_back(std::make_shared<LayerNorm>(4));
  dst.push_back(std::make_shared<Linear>(3, 4, true, gen));
  dst.push_back(std::make_shared<LayerNorm>(4));
  init::normal_(src.named_parameters()[2].second, 0.0, 1.0, gen);  // make the LayerNorm weight differ too

  const std::vector<Tensor> before = dst.parameters();
  const LoadResult result = dst.load_state_dict(src.state_dict());
  CHECK(result.missing.empty());
  CHECK(result.unexpected.empty());
  CHECK(result.mismatched.empty());
  const StateDict a = src.state_dict(), b = dst.state_dict();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(values(a[i].second) == values(b[i].second));
    CHECK_FALSE(a[i].second.is_same(b[i].second));
    CHECK(b[i].second.is_same(before[i]));  // copied into, not replaced
  }
  // A loaded f64 state is cast into the f32 parameters.
  StateDict doubled;
  for (const auto& [name, t] : src.state_dict()) doubled.emplace_back(name, to(t, DType::f64) * 2.0);
  dst.load_state_dict(doubled);
  CHECK(dst.parameters()[0].dtype() == DType::f32);
  CHECK(values(dst.parameters()[0]) == values(src.parameters()[0] * 2.0));
}

TEST_CASE("a strict load names every missing, unexpected and mis-shaped key, and changes nothing") {
  Generator gen(2);
  Sequential model;
  model.push_back(std::make_shared<Linear>(2, 3, true, gen));
  model.push_back(std::make_shared<LayerNorm>(3));
  StateDict state;
  for (const auto& [name, t] : model.state_dict()) {
    if (name == "0.bias") continue;
    state.emplace_back(name, name == "1.weight" ? zeros({4}) : zeros(t.shape()));
  }
  state.emplace_back("extra", zeros({1}));
  state.emplace_back("1.running_mean", zeros({3}));
  const std::vector<float> weight_before = values(model.parameters()[0]);
  CHECK_THROWS_WITH_AS(model.load_state_dict(state),
                       "load_state_dict: the state does not fit this Sequential: missing keys [0.bias]; unexpected "
                       "keys [extra, 1.running_mean]; mis-shaped keys [1.weight: module [3], state [4]]",
                       Error);
  CHECK(values(model.parameters()[0]) == weight_before);

  StateDict twice{{"0.weight", zeros({3, 2})}, {"0.weight", zeros({3, 2})}};
  CHECK_THROWS_WITH_AS(model.load_state_dict(twice), "load_state_dict: key '0.weight' appears twice", Error);
}

TEST_CASE("a non-strict load copies what matches and reports the rest") {
  Generator gen(3);
  Sequential model;
  model.push_back(std::make_shared<Linear>(2, 3, true, gen));
  model.push_back(std::make_shared<LayerNorm>(3));
  const std::vector<float> bias_before = values(model.parameters()[1]);
  StateDict state{{"0.weight", full({3, 2}, 7.0)}, {"1.weight", zeros({5})}, {"head.weight", zeros({2})}};
  const LoadResult r = model.load_state_dict(state, false);
  CHECK(r.missing == std::vector<std::string>{"0.bias", "1.bias"});
  CHECK(r.unexpected == std::vector<std::string>{"head.weight"});
  CHECK(r.mismatched == std::vector<std::string>{"1.weight"});
  CHECK(values(model.parameters()[0]) == std::vector<float>(6, 7.0f));
  CHECK(values(model.parameters()[1]) == bias_before);
  CHECK(values(model.parameters()[2]) == std::vector<float>(3, 1.0f));  // mis-shaped: left alone
}

TEST_CASE("train and eval reach every descendant") {
  Generator gen(4);
  GPT gpt({.vocab_size = 5, .block_size = 4, .n_layer = 2, .n_head = 1, .n_embd = 4, .dropout = 0.1}, gen);
  auto all_training = [&](bool expected) {
    for (const auto& [name, m] : gpt.named_modules())
      if (m->is_training() != expected) return false;
    return true;
  };
  CHECK(all_training(true));
  gpt.eval();
  CHECK(all_training(false));
  CHECK(gpt.named_modules().size() == 1 + 4 + 2 * 13 + 2);  // self, wte/wpe/drop/blocks, 2 blocks, ln_f/lm_head
  gpt.train();
  CHECK(all_training(true));
}

TEST_CASE("zero_grad drops grads or zeroes them in place") {
  Generator gen(5);
  Linear lin(2, 2, true, gen);
  backward(sum(lin(ones({1, 2}))));
  Tensor grad = lin.weight().grad();
  REQUIRE(grad.defined());
  lin.zero_grad(false);
  CHECK(lin.weight().grad().is_same(grad));
  CHECK(values(grad) == std::vector<float>(4, 0.0f));
  lin.zero_grad();
  CHECK_FALSE(lin.weight().grad().defined());
  CHECK_FALSE(lin.bias().grad().defined());
}

TEST_CASE("to(DType) casts floating parameters and buffers in place; integer buffers keep their dtype") {
  Parent p;
  const Tensor scale = p.parameters()[0];
  const Tensor count = p.named_buffers()[1].second;
  scale.set_grad(full({3}, 0.5));
  p.to(DType::f64);
  CHECK(scale.dtype() == DType::f64);  // the old handle sees the cast
  CHECK(scale.requires_grad());
  CHECK(scale.grad().dtype() == DType::f64);  // grads follow
  CHECK(scale.grad().to_vector<double>() == std::vector<double>{0.5, 0.5, 0.5});
  CHECK(p.named_buffers()[0].second.dtype() == DType::f64);
  CHECK(count.dtype() == DType::i64);
  const Tensor data_before = detach(scale);
  p.to(Device::cpu());  // already there: nothing moves
  CHECK(scale.storage() == data_before.storage());
  CHECK_THROWS_WITH_AS(p.to(DType::i32), "Module::to: parameters can only be cast to a floating dtype, got i32", Error);
}
