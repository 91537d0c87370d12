// GPT::parallelize against the whole GPT built from the same seed, on the same batch: logits, loss,
// every parameter's grad (the ranks' parts joined) and the parameters after 3 AdamW steps within 1e-5
// relative in f32, for a tied head (with and without GPT-2's vocab padding) and an untied one, over
// vocabularies that do not divide by tp, also with class weights and label smoothing; the collectives
// one step runs; and the refusals.
#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../error_of.h"
#include "tp_support.h"

namespace test {

namespace {

using nn::parallel::TensorSplit;

struct Case {
  const char* name;
  nn::GPTConfig config;
};

std::vector<Case> cases() {
  const nn::GPTConfig base{.vocab_size = 30, .block_size = 8, .n_layer = 2, .n_head = 4, .n_embd = 16};
  nn::GPTConfig tied = base, padded = base, untied = base;
  tied.tie_weights = true;
  padded.tie_weights = true;
  padded.padded_vocab_size = 36;  // 36 rows: 9 per rank at tp 4, 18 at tp 2
  return {{"tied, vocab 30", tied}, {"tied, vocab 30 padded to 36", padded}, {"untied, vocab 30", untied}};
}

// The full model's grads or values as the parallel model holds them, joined across tp.
nn::StateDict joined(nn::GPT& model, Communicator& tp, bool grads) {
  const std::map<std::string, TensorSplit> splits = nn::parallel::tensor_splits(model);
  nn::StateDict out;
  for (const auto& [name, p] : model.named_parameters()) {
    const Tensor t = grads ? p.grad() : p;
    const auto split = splits.find(name);
    out.emplace_back(name, split == splits.end() ? t : gather_full(t, split->second, tp));
  }
  return out;
}

nn::StateDict grads_of(const nn::Module& model) {
  nn::StateDict grads;
  for (const auto& [name, p] : model.named_parameters()) grads.emplace_back(name, p.grad());
  return grads;
}

double largest(const nn::StateDict& entries) {
  double m = 0;
  for (const auto& [name, t] : entries) m = std::max(m, max_abs(t));
  return m;
}

// Every entry of got against the full model's, relative to the full model's largest value: the grads
// of the zero-initialised biases are all near zero (the k bias's is rounding noise, since softmax
// ignores a shift shared by every key), so a per-tensor scale would compare noise with noise.
void check_entries(const nn::StateDict& got, const nn::StateDict& expected) {
  REQUIRE(got.size() == expected.size());
  const double scale = largest(expected);
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(expected[i].first);
    CHECK(got[i].first == expected[i].first);
    CHECK(differs_at_scale(got[i].second, expected[i].second, scale) == "");
  }
}

struct Batch {
  Tensor idx, targets;
};

// Ids drawn the same on every rank (a seeded engine per batch), the whole vocabulary reachable.
Batch batch(int64_t vocab, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::uniform_int_distribution<int64_t> id_of(0, vocab - 1);
  auto ids = [&] {
    std::vector<int64_t> v(12);
    for (int64_t& id : v) id = id_of(engine);
    return from_vector(v, {2, 6});
  };
  Tensor idx = ids();
  return {idx, ids()};
}

}  // namespace

TEST_CASE("a tensor-parallel GPT equals the whole GPT: logits, loss, grads and 3 AdamW steps") {
  TpGroups groups;
  for (const Case& c : cases())
    for (Communicator* tp : groups.all) {
      INFO(c.name, ", rank ", tp->rank(), " of tp ", tp->size());
      Generator init_full(201), init_tp(201);
      nn::GPT full(c.config, init_full), parallel(c.config, init_tp);
      // The optimizer is built before the split, as a user builds it before prepare.
      optim::AdamW full_opt(full.parameters(), {.lr = 1e-3}), tp_opt(parallel.parameters(), {.lr = 1e-3});
      parallel.parallelize(*tp);
      CHECK(parallel.tensor_parallel_group() == tp);
      for (int step = 0; step < 3; ++step) {
        const Batch b = batch(c.config.vocab_size, 300 + step);
        if (step == 0) {
          const Tensor logits = parallel.forward(b.idx);
          CHECK(differs(logits, full.forward(b.idx)) == "");
          CHECK(differs_across_ranks(logits, *tp) == "");
        }
        full_opt.zero_grad();
        tp_opt.zero_grad();
        const Tensor full_loss = full.loss(b.idx, b.targets), tp_loss = parallel.loss(b.idx, b.targets);
        CHECK(differs(tp_loss, full_loss) == "");
        backward(full_loss);
        backward(tp_loss);
        check_entries(joined(parallel, *tp, true), grads_of(full));
        full_opt.step();
        tp_opt.step();
      }
      check_entries(joined(parallel, *tp, false), full.named_parameters());
    }
}

TEST_CASE("a tensor-parallel GPT's loss with class weights and label smoothing equals the whole GPT's: loss and "
          "grads") {
  TpGroups groups;
  for (const Case& c : cases())
    for (Communicator* tp : groups.all) {
      INFO(c.name, ", rank ", tp->rank(), " of tp ", tp->size());
      Generator init_full(202), init_tp(202), weights(203);
      nn::GPT full(c.config, init_full), parallel(c.config, init_tp);
      parallel.parallelize(*tp);
      const Batch b = batch(c.config.vocab_size, 310);
      const CrossEntropyOptions options{.weight = rand({c.config.vocab_size}, weights) + 0.5, .label_smoothing = 0.1};
      const Tensor full_loss = full.loss(b.idx, b.targets, options), tp_loss = parallel.loss(b.idx, b.targets, options);
      CHECK(differs(tp_loss, full_loss) == "");
      CHECK(differs(full_loss, full.loss(b.idx, b.targets)) != "");  // the options change the loss
      backward(full_loss);
      backward(tp_loss);
      check_entries(joined(parallel, *tp, true), grads_of(full));
    }
}

TEST_CASE("a tensor-parallel GPT's loss runs 1 + 2L + 3 all-reduces forward and 2L + 1 backward") {
  for (const Case& c : cases()) {
    INFO(c.name);
    CountingCommunicator tp(world()->dup());
    Generator init(211);
    nn::GPT model(c.config, init);
    model.parallelize(tp);
    const Batch b = batch(c.config.vocab_size, 212);
    tp.reset();
    const Tensor loss = model.loss(b.idx, b.targets);
    const int layers = static_cast<int>(c.config.n_layer);
    // The embedding's g, each block's two g, and the vocab-parallel loss's max, target logit and sum.
    CHECK(tp.count("all_reduce") == 1 + 2 * layers + 3);
    CHECK(collectives_run(tp) == 1 + 2 * layers + 3);
    tp.reset();
    backward(loss);
    // Each block's two f, and the head's f; the loss and the embedding send nothing back.
    CHECK(tp.count("all_reduce") == 2 * layers + 1);
    CHECK(collectives_run(tp) == 2 * layers + 1);
  }
}

TEST_CASE("GPT::parallelize refuses a head count that does not divide by tp, and a second split") {
  TpGroups groups;
  for (Communicator* tp : groups.all) {
    Generator init(221);
    nn::GPT odd({.vocab_size = 30, .block_size = 8, .n_layer = 1, .n_head = 3, .n_embd = 12}, init);
    const std::string message = test_support::error_of([&] { odd.parallelize(*tp); });
    CHECK(message.find("GPT::parallelize: n_head 3 is not a multiple of the tensor-parallel size " +
                       std::to_string(tp->size())) != std::string::npos);
    CHECK(odd.tensor_parallel_group() == nullptr);
    CHECK(odd.named_parameters()[0].second.size(0) == 30);  // the refusal left the model whole

    nn::GPT model(cases()[0].config, init);
    model.parallelize(*tp);
    CHECK(test_support::error_of([&] { model.parallelize(*tp); })
              .find("GPT::parallelize: the model is tensor-parallel already (over " + std::to_string(tp->size()) +
                    " ranks)") != std::string::npos);
  }
}

}  // namespace test
