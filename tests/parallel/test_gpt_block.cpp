// ParallelGPTBlock against the full GPTBlock it is built from, on the same input: the output, the
// input grad and every parameter's grad (each rank's part of the full grad) within 1e-5 relative in
// f32; two all-reduces forward and two backward per block; replicated dropout masks.
#include <string>
#include <vector>

#include "../error_of.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"
#include "tp_support.h"

namespace test {

namespace {

using nn::parallel::ParallelGPTBlock;

Tensor leaf_copy(const Tensor& t) {
  Tensor leaf = nograd::clone(t);
  leaf.requires_grad_();
  return leaf;
}

// Rank r's part of a full tensor along dim: the r-th of size parts of each of `blocks` equal blocks,
// joined (q, k and v of the rank's heads in the fused qkv projection: 3 blocks).
Tensor part_of(const Tensor& full, int64_t dim, int64_t blocks, const Communicator& tp) {
  const int64_t block = full.size(dim) / blocks, part = block / tp.size();
  std::vector<Tensor> pieces;
  for (int64_t b = 0; b < blocks; ++b) pieces.push_back(nograd::narrow(full, dim, b * block + tp.rank() * part, part));
  return nograd::cat(pieces, dim);
}

// How each parameter of a block is split: along which dim, in how many blocks; dim -1: replicated.
struct Split {
  int64_t dim, blocks;
};
Split split_of(const std::string& name) {
  if (name == "attn.qkv.weight" || name == "attn.qkv.bias") return {0, 3};
  if (name == "mlp.fc.weight" || name == "mlp.fc.bias") return {0, 1};
  if (name == "attn.proj.weight" || name == "mlp.proj.weight") return {1, 1};
  return {-1, 1};  // the LayerNorms and the row-parallel biases
}

}  // namespace

TEST_CASE("ParallelGPTBlock equals the full GPTBlock: output, input grad and every parameter's grad") {
  TpGroups groups;
  for (Communicator* tp : groups.all) {
    INFO("rank ", tp->rank(), " of ", tp->size());
    Generator init(101);
    nn::GPTBlock full(16, 4, 0.0, init);
    auto block = ParallelGPTBlock::from_full(full, *tp);
    CHECK(block->attn()->local_heads() == 4 / tp->size());
    Generator data(102);
    const Tensor x = leaf_copy(randn({2, 5, 16}, data)), xt = leaf_copy(x);
    const Tensor w = randn({2, 5, 16}, data);
    const Tensor y = full(x);
    backward(y, w);
    const Tensor yt = (*block)(xt);
    CHECK(differs(yt, y) == "");
    CHECK(differs_across_ranks(yt, *tp) == "");
    backward(yt, w);
    CHECK(differs(xt.grad(), x.grad()) == "");
    const nn::StateDict full_params = full.named_parameters(), tp_params = block->named_parameters();
    REQUIRE(full_params.size() == tp_params.size());
    for (size_t i = 0; i < full_params.size(); ++i) {
      const auto& [name, p] = full_params[i];
      INFO(name);
      CHECK(tp_params[i].first == name);
      const Split split = split_of(name);
      const Tensor expected = split.dim < 0 ? p.grad() : part_of(p.grad(), split.dim, split.blocks, *tp);
      CHECK(differs(tp_params[i].second.grad(), expected) == "");
    }
  }
}

TEST_CASE("ParallelGPTBlock runs two all-reduces forward and two backward, and nothing else") {
  CountingCommunicator tp(world()->dup());
  Generator init(111);
  nn::GPTBlock full(16, 4, 0.0, init);
  auto block = ParallelGPTBlock::from_full(full, tp);
  Generator data(112);
  const Tensor x = leaf_copy(randn({2, 3, 16}, data));
  tp.reset();
  const Tensor y = (*block)(x);
  CHECK(tp.count("all_reduce") == 2);  // g after the attention's and the MLP's row-parallel projections
  CHECK(collectives_run(tp) == 2);
  tp.reset();
  backward(sum(y * y));
  CHECK(tp.count("all_reduce") == 2);  // f before the qkv and the fc column-parallel projections
  CHECK(collectives_run(tp) == 2);
}

TEST_CASE("ParallelGPTBlock with dropout: the replicated dropouts draw the same masks on every rank") {
  TpGroups groups;
  for (Communicator* tp : groups.all) {
    Generator init(121);
    nn::GPTBlock full(16, 4, 0.3, init);
    auto block = ParallelGPTBlock::from_full(full, *tp);
    Generator data(122);
    const Tensor y = (*block)(randn({2, 3, 16}, data));
    CHECK(differs_across_ranks(y, *tp) == "");
    block->eval();  // and without dropout it is the full block again
    full.eval();
    const Tensor x = randn({2, 3, 16}, data);
    CHECK(differs((*block)(x), full(x)) == "");
  }
}

TEST_CASE("ParallelGPTBlock refuses a head count that does not divide by tp, naming both") {
  TpGroups groups;
  for (Communicator* tp : groups.all) {
    Generator init(131);
    nn::GPTBlock full(6, 3, 0.0, init);
    const std::string message = test_support::error_of([&] { ParallelGPTBlock::from_full(full, *tp); });
    CHECK(message.find("ParallelSelfAttention: n_head 3 is not a multiple of the tensor-parallel size " +
                       std::to_string(tp->size())) != std::string::npos);
  }
}

}  // namespace test
