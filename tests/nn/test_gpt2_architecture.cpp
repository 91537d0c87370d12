// GPT-2's exact architecture as a GPTConfig option: the lm head tied to wte (one parameter whose grad
// sums both uses, against an untied model holding the same weights), the padded vocab (logits over the
// real vocab only, the padding rows zero and without grad, the loss of the unpadded model), and the
// GPTConfig::gpt2 presets against llm.c's sizes.
#include <doctest/doctest.h>

#include <algorithm>

#include "accel.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"

using namespace accel;
using namespace accel::nn;

namespace {

std::vector<float> values(const Tensor& t) { return contiguous(to(t, DType::f32)).to_vector<float>(); }

Tensor param(const Module& m, const std::string& name) {
  for (const auto& [key, t] : m.named_parameters())
    if (key == name) return t;
  FAIL("no parameter " << name);
  return Tensor();
}

bool has_param(const Module& m, const std::string& name) {
  const StateDict p = m.named_parameters();
  return std::any_of(p.begin(), p.end(), [&](const auto& kv) { return kv.first == name; });
}

// Copies into m every parameter of src that m has by the same name and shape.
void copy_matching(Module& m, const Module& src) { m.load_state_dict(src.state_dict(), false); }

constexpr GPTConfig kSmall{.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 8};

GPTConfig with(GPTConfig c, bool tie, int64_t padded) {
  c.tie_weights = tie;
  c.padded_vocab_size = padded;
  return c;
}

const Tensor kTokens = from_vector<int64_t>({1, 4, 2, 6, 0, 3, 10, 7, 5, 9, 8, 2}, {2, 6});
const Tensor kTargets = from_vector<int64_t>({4, 2, 6, 0, 3, 10, 7, 5, 9, 8, 2, 1}, {2, 6});

}  // namespace

TEST_CASE("a tied GPT holds one wte.weight for the embedding and the head, and its grad sums both uses") {
  Generator gen(5);
  GPT tied(with(kSmall, true, 0), gen), untied(with(kSmall, false, 0), gen);
  CHECK_FALSE(has_param(tied, "lm_head.weight"));
  CHECK(has_param(untied, "lm_head.weight"));
  CHECK(tied.named_parameters().size() + 1 == untied.named_parameters().size());
  CHECK(tied.state_dict().size() + 1 == untied.state_dict().size());
  // The untied model computes the same function once its head holds wte's values.
  copy_matching(untied, tied);
  untied.load_state_dict({{"lm_head.weight", param(tied, "wte.weight")}}, false);

  const Tensor tied_logits = tied(kTokens), untied_logits = untied(kTokens);
  CHECK(tied_logits.shape() == Shape{2, 6, 11});
  CHECK(values(tied_logits) == values(untied_logits));
  backward(nn::cross_entropy(tied_logits, kTargets));
  backward(nn::cross_entropy(untied_logits, kTargets));

  const std::vector<float> head = values(param(untied, "lm_head.weight").grad());
  const std::vector<float> embedding = values(param(untied, "wte.weight").grad());
  const std::vector<float> sum = values(param(tied, "wte.weight").grad());
  REQUIRE(sum.size() == head.size());
  bool head_contributes = false;
  for (size_t i = 0; i < sum.size(); ++i) {
    CHECK(sum[i] == embedding[i] + head[i]);
    head_contributes |= head[i] != 0.0f && embedding[i] != 0.0f;
  }
  CHECK(head_contributes);  // both uses reach the same entries, so a missed one would show
  for (const auto& [name, p] : tied.named_parameters())
    if (name != "wte.weight") CHECK_MESSAGE(values(p.grad()) == values(param(untied, name).grad()), name);
}

TEST_CASE(
    "a padded GPT: wte has the padded rows, zero at init; logits, loss and real grads are the unpadded "
    "model's; the padding gets zero grad and stays zero under AdamW") {
  for (const bool tie : {true, false}) {
    CAPTURE(tie);
    Generator gen(6);
    GPT padded(with(kSmall, tie, 16), gen), plain(with(kSmall, tie, 0), gen);
    const Tensor wte = param(padded, "wte.weight");
    CHECK(wte.shape() == Shape{16, 8});
    if (!tie) CHECK(param(padded, "lm_head.weight").shape() == Shape{11, 8});
    for (float v : values(narrow(wte, 0, 11, 5))) CHECK(v == 0.0f);
    for (float v : values(narrow(wte, 0, 0, 11))) CHECK(v != 0.0f);

    // The same real weights: every parameter but wte by name, then wte's first 11 rows.
    copy_matching(padded, plain);
    {
      NoGradGuard no_grad;
      nograd::copy_(nograd::narrow(wte, 0, 0, 11), param(plain, "wte.weight"));
    }
    const Tensor padded_logits = padded(kTokens), plain_logits = plain(kTokens);
    CHECK(padded_logits.shape() == Shape{2, 6, 11});  // no padded logit to sample or to score
    CHECK(values(padded_logits) == values(plain_logits));
    const Tensor padded_loss = nn::cross_entropy(padded_logits, kTargets);
    const Tensor plain_loss = nn::cross_entropy(plain_logits, kTargets);
    CHECK(padded_loss.item() == plain_loss.item());
    backward(padded_loss);
    backward(plain_loss);
    const Tensor grad = wte.grad();
    REQUIRE(grad.shape() == Shape{16, 8});
    for (float v : values(narrow(grad, 0, 11, 5))) CHECK(v == 0.0f);
    CHECK(values(narrow(grad, 0, 0, 11)) == values(param(plain, "wte.weight").grad()));

    optim::AdamW opt(padded.parameters(), {.lr = 0.1, .weight_decay = 0.1});
    opt.step();
    for (float v : values(narrow(wte, 0, 11, 5))) CHECK(v == 0.0f);
  }
}

TEST_CASE("GPTConfig::gpt2 gives llm.c's four GPT-2 sizes and refuses other depths") {
  struct Size {
    int depth;
    int64_t n_head, n_embd;
  };
  for (const Size s : {Size{12, 12, 768}, Size{24, 16, 1024}, Size{36, 20, 1280}, Size{48, 25, 1600}}) {
    const GPTConfig c = GPTConfig::gpt2(s.depth);
    CHECK(c.n_layer == s.depth);
    CHECK(c.n_head == s.n_head);
    CHECK(c.n_embd == s.n_embd);
    CHECK(c.block_size == 1024);
    CHECK(c.vocab_size == 50257);
    CHECK(c.padded_vocab_size == 50304);
    CHECK(c.embedding_rows() == 50304);
    CHECK(c.tie_weights);
    CHECK(c.dropout == 0.0);
  }
  // llm.c prints num_parameters: 124475904 for gpt2_124M.bin (padded wte, tied head).
  Generator gen(0);
  GPT d12(GPTConfig::gpt2(12), gen);
  int64_t count = 0;
  for (const Tensor& p : d12.parameters()) count += p.numel();
  CHECK(count == 124475904);
  CHECK_THROWS_WITH_AS(GPTConfig::gpt2(6), doctest::Contains("GPTConfig::gpt2: depth 6 is not one of GPT-2's"), Error);
}

TEST_CASE("a padded vocab smaller than the vocab is refused") {
  Generator gen(7);
  CHECK_THROWS_WITH_AS(GPT(with(kSmall, true, 10), gen),
                       "GPT: padded_vocab_size 10 must be 0 (none) or >= vocab_size 11", Error);
}
