// Deferred init at the nn layer: every module (Linear, Embedding with a padding row, LayerNorm, MLP,
// GPT with its GPT-2 init, tied or not, with padded vocab rows, a user module) built under
// DeferredInit holds meta parameters, refuses to run or be stepped, and materialises to exactly the
// parameters a normal build from the same seed has, leaving the generator where a normal build does.
#include <doctest/doctest.h>

#include <cstring>
#include <functional>

#include "../error_of.h"
#include "accel.h"
#include "tensor/meta_tensor.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"

using namespace accel;
using test_support::error_of;

namespace {

std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor c = nograd::contiguous(t);
  std::vector<unsigned char> out(c.nbytes());
  if (!out.empty()) std::memcpy(out.data(), c.data_ptr(), out.size());
  return out;
}

// A user's module: a parameter from randn, one initialised by each of nn::init's four initialisers
// (one of them on a row range), and a buffer.
class UserModule : public nn::Module {
 public:
  explicit UserModule(Generator& gen) {
    scale_ = register_parameter("scale", randn({3, 5}, gen));
    table_ = register_parameter("table", empty({7, 3}));
    nn::init::uniform_(table_, -0.5, 0.5, gen);
    nn::init::normal_(nograd::narrow(table_, 0, 2, 3), 1.0, 0.1, gen);
    nn::init::ones_(nograd::select(table_, 0, 6));
    shift_ = register_parameter("shift", empty({5}));
    nn::init::zeros_(shift_);
    register_buffer("count", zeros({1}, DType::i64));
  }
  std::string type_name() const override { return "UserModule"; }

 private:
  Tensor scale_, table_, shift_;
};

using Build = std::function<std::shared_ptr<nn::Module>(Generator&)>;

std::vector<std::pair<std::string, Build>> builds() {
  nn::GPTConfig untied{.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 8};
  nn::GPTConfig tied_padded = untied;
  tied_padded.tie_weights = true;
  tied_padded.padded_vocab_size = 16;
  return {
      {"Linear", [](Generator& g) { return std::make_shared<nn::Linear>(7, 13, true, g); }},
      {"Embedding with padding_idx",
       [](Generator& g) {
         return std::make_shared<nn::Embedding>(9, 5, g, nn::EmbeddingOptions{.init_std = 0.3, .padding_idx = 2});
       }},
      {"LayerNorm", [](Generator&) { return std::make_shared<nn::LayerNorm>(6); }},
      {"MLP", [](Generator& g) { return std::make_shared<nn::MLP>(6, 0.1, g); }},
      {"GPT", [untied](Generator& g) { return std::make_shared<nn::GPT>(untied, g); }},
      {"GPT tied, padded vocab", [tied_padded](Generator& g) { return std::make_shared<nn::GPT>(tied_padded, g); }},
      {"user module", [](Generator& g) { return std::make_shared<UserModule>(g); }},
  };
}

}  // namespace

TEST_CASE("every module built under DeferredInit materialises to the normal build's parameters, bitwise") {
  for (const auto& [what, build] : builds()) {
    INFO(what);
    Generator eager_gen(2024), deferred_gen(2024);
    const auto eager = build(eager_gen);
    std::shared_ptr<nn::Module> deferred;
    {
      auto scope = init_empty_weights();
      deferred = build(deferred_gen);
    }
    // Dropout layers draw their seeds from the same stream, so the generator must end where it does.
    CHECK(deferred_gen.state() == eager_gen.state());
    CHECK(nn::first_meta_tensor(*eager).empty());
    const nn::StateDict eager_state = eager->state_dict();
    nn::StateDict meta_state = deferred->state_dict();
    REQUIRE(meta_state.size() == eager_state.size());
    for (const auto& [name, t] : deferred->named_parameters()) CHECK(t.is_meta());
    CHECK_FALSE(nn::first_meta_tensor(*deferred).empty());
    // Held elsewhere before materialising (an optimizer's list), so identity must be kept.
    const std::vector<Tensor> handles = deferred->parameters();
    nn::materialize(*deferred);
    CHECK(nn::first_meta_tensor(*deferred).empty());
    const nn::StateDict state = deferred->state_dict();
    for (size_t i = 0; i < state.size(); ++i) {
      INFO(state[i].first);
      CHECK(state[i].first == eager_state[i].first);
      CHECK(bytes_of(state[i].second) == bytes_of(eager_state[i].second));
    }
    const std::vector<Tensor> after = deferred->parameters();
    for (size_t i = 0; i < handles.size(); ++i) CHECK(handles[i].is_same(after[i]));
  }
}

TEST_CASE("a tied GPT's head and embedding stay one tensor through deferred init") {
  Generator gen(3);
  std::shared_ptr<nn::GPT> gpt;
  {
    DeferredInit deferred;
    gpt = std::make_shared<nn::GPT>(
        nn::GPTConfig{.vocab_size = 11, .block_size = 8, .n_layer = 1, .n_head = 2, .n_embd = 8, .tie_weights = true},
        gen);
  }
  nn::materialize(*gpt);
  const Tensor logits = gpt->forward(from_vector<int64_t>({1, 2, 3, 4}, {1, 4}));
  CHECK(logits.shape() == Shape{1, 4, 11});
}

TEST_CASE("a model built under DeferredInit refuses to run, to be stepped or to be cast before it is materialised") {
  Generator gen(1);
  std::shared_ptr<nn::Linear> linear;
  {
    DeferredInit deferred;
    linear = std::make_shared<nn::Linear>(7, 13, true, gen);
  }
  CHECK(error_of([&] { (void)linear->forward(zeros({2, 7})); }) ==
        "Linear::forward: parameter 'weight' (f32 [13, 7]) is not materialised: the module was built under "
        "accel::DeferredInit (init_empty_weights); give it to Accelerator::prepare, or call nn::materialize, before "
        "running it");
  optim::SGD sgd(linear->parameters(), optim::SGDOptions{.lr = 0.1});  // an optimizer may be made over it, for prepare to take both
  CHECK(error_of([&] { sgd.step(); }) ==
        "SGD::step: parameter 0 (f32 [13, 7]) is not materialised: its model was built under accel::DeferredInit "
        "(init_empty_weights); prepare the model and this optimizer with an Accelerator (or call nn::materialize on "
        "the model) before stepping");
  CHECK(error_of([&] { linear->to(DType::bf16); }) ==
        "Module::to: 'weight' is a meta tensor (f32 [13, 7], built under accel::DeferredInit); a cast to bf16 would "
        "change the values its initialiser gives, so cast after it is materialised");
  linear->to(Device::cpu());  // a move to the device it is on is free
  CHECK(linear->weight().is_meta());
  nn::materialize(*linear);
  CHECK(linear->forward(zeros({2, 7})).shape() == Shape{2, 13});
}

TEST_CASE("load_state_dict into a model built under DeferredInit makes the state its init; a bad state changes nothing") {
  Generator gen(1), other(2);
  auto source = std::make_shared<nn::Linear>(7, 13, true, gen);
  std::shared_ptr<nn::Linear> linear;
  {
    DeferredInit deferred;
    linear = std::make_shared<nn::Linear>(7, 13, true, other);
  }
  const uint64_t fingerprint = linear->weight().storage()->recipe()->fingerprint();
  // Refused before anything is recorded: a missing key, and a state that is itself meta.
  CHECK(error_of([&] { linear->load_state_dict({{"weight", source->weight()}}); })
            .find("missing keys [bias]") != std::string::npos);
  CHECK(error_of([&] { linear->load_state_dict(linear->state_dict()); }) ==
        "Linear::load_state_dict: 'weight' of the state is a meta tensor (built under DeferredInit): it has no values "
        "to load; materialise its model first");
  CHECK(linear->weight().storage()->recipe()->fingerprint() == fingerprint);
  // An f64 state, and a transposed (non-contiguous) weight: the values are cast and read in row-major order.
  const Tensor weight64 = transpose(contiguous(transpose(to(source->weight(), DType::f64), 0, 1)), 0, 1);
  REQUIRE_FALSE(weight64.is_contiguous());
  const nn::LoadResult result = linear->load_state_dict({{"weight", weight64}, {"bias", source->bias()}});
  CHECK(result.missing.empty());
  CHECK(linear->weight().is_meta());  // nothing is read until it is materialised
  nn::materialize(*linear);
  CHECK(linear->weight().to_vector<float>() == to(weight64, DType::f32).to_vector<float>());
  CHECK(linear->bias().to_vector<float>() == source->bias().to_vector<float>());
}

TEST_CASE("inside a DeferredInit scope an op that computes values throws instead of writing into a meta output") {
  Generator gen(1);
  DeferredInit deferred;
  const Tensor given = from_vector<float>({1, 2, 3});  // holds values it was given
  // The output of an op is allocated through empty(), so it is meta here and the op cannot write it.
  CHECK(error_of([&] { (void)(given * 2.0); }).find("shape [3] is not materialised") != std::string::npos);
}
