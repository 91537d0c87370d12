// ColumnParallelLinear, RowParallelLinear and VocabParallelEmbedding against the full single-rank
// layer with the same weights on the same input: outputs, input grads and the parameter grads gathered
// from the ranks agree within 1e-5 relative in f32; the layers built from a Generator equal the
// slices of the full layer drawn from the same seed; the all-reduces each layer runs are counted.
#include <string>
#include <vector>

#include "../error_of.h"
#include "nn/parallel/partition.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"
#include "tp_support.h"

namespace test {

namespace {

using nn::parallel::ColumnParallelLinear;
using nn::parallel::RowParallelLinear;
using nn::parallel::VocabParallelEmbedding;

Tensor leaf_copy(const Tensor& t) {
  Tensor leaf = nograd::clone(t);
  leaf.requires_grad_();
  return leaf;
}

// This rank's columns [r n, (r + 1) n) of t's last dim, n = t.size(-1) / tp.size().
Tensor rank_columns(const Tensor& t, const Communicator& tp) {
  const int64_t n = t.size(-1) / tp.size();
  return nograd::contiguous(nograd::narrow(t, -1, tp.rank() * n, n));
}

bool mentions(const std::string& message, const std::vector<std::string>& words) {
  for (const std::string& w : words)
    if (message.find(w) == std::string::npos) return false;
  return !message.empty();
}

}  // namespace

TEST_CASE("ColumnParallelLinear equals the full Linear, with and without gather_output") {
  TpGroups groups;
  for (Communicator* tp : groups.all) {
    for (const bool gather : {true, false}) {
      INFO("rank ", tp->rank(), " of ", tp->size(), ", gather_output ", gather);
      const int64_t in = 6, out = 4 * tp->size();
      Generator init(11);
      nn::Linear full(in, out, true, init);
      auto column = ColumnParallelLinear::from_full(full, *tp, {.gather_output = gather});
      CHECK(column->local_out_features() == 4);
      Generator data(12);
      const Tensor x = leaf_copy(randn({3, 5, in}, data)), xt = leaf_copy(x);
      const Tensor w = randn({3, 5, out}, data);  // the same on every rank
      const Tensor y = full(x);
      backward(y, w);
      const Tensor yt = (*column)(xt);
      if (gather) {
        CHECK(differs(yt, y) == "");
        backward(yt, w);
      } else {
        // Each rank's own columns; the objective sum over the ranks of <w_r, y_r> is the full <w, y>.
        CHECK(differs(yt, rank_columns(y, *tp)) == "");
        backward(yt, rank_columns(w, *tp));
      }
      CHECK(differs(xt.grad(), x.grad()) == "");
      CHECK(differs(gather_along(column->weight().grad(), 0, *tp), full.weight().grad()) == "");
      CHECK(differs(gather_along(column->bias().grad(), 0, *tp), full.bias().grad()) == "");
    }
  }
}

TEST_CASE("RowParallelLinear equals the full Linear, with a replicated or an already split input") {
  TpGroups groups;
  for (Communicator* tp : groups.all) {
    for (const bool parallel_input : {false, true}) {
      INFO("rank ", tp->rank(), " of ", tp->size(), ", input_is_parallel ", parallel_input);
      const int64_t in = 4 * tp->size(), out = 6;
      Generator init(21);
      nn::Linear full(in, out, true, init);
      auto row = RowParallelLinear::from_full(full, *tp, {.input_is_parallel = parallel_input});
      CHECK(row->local_in_features() == 4);
      Generator data(22);
      const Tensor x = leaf_copy(randn({3, 5, in}, data));
      const Tensor w = randn({3, 5, out}, data);
      const Tensor y = full(x);
      backward(y, w);
      const Tensor xt = leaf_copy(parallel_input ? rank_columns(x, *tp) : x);
      const Tensor yt = (*row)(xt);
      CHECK(differs(yt, y) == "");  // the bias is added once, after the sum over the ranks
      CHECK(differs_across_ranks(yt, *tp) == "");
      backward(yt, w);
      CHECK(differs(xt.grad(), parallel_input ? rank_columns(x.grad(), *tp) : x.grad()) == "");
      CHECK(differs(gather_along(row->weight().grad(), 1, *tp), full.weight().grad()) == "");
      CHECK(differs(row->bias().grad(), full.bias().grad()) == "");
    }
  }
}

TEST_CASE("column then row parallel (an MLP) equals the two full layers; one all-reduce forward, one backward") {
  TpGroups groups;
  CountingCommunicator tp(world()->dup());
  INFO("rank ", tp.rank(), " of ", tp.size());
  Generator init(31);
  nn::Linear fc(6, 4 * tp.size(), true, init), proj(4 * tp.size(), 6, true, init);
  auto column = ColumnParallelLinear::from_full(fc, tp, {.gather_output = false});
  auto row = RowParallelLinear::from_full(proj, tp, {.input_is_parallel = true});
  Generator data(32);
  const Tensor x = leaf_copy(randn({2, 3, 6}, data)), xt = leaf_copy(x);
  const Tensor w = randn({2, 3, 6}, data);
  const Tensor y = proj(gelu(fc(x)));
  backward(y, w);
  tp.reset();
  const Tensor yt = (*row)(gelu((*column)(xt)));
  CHECK(tp.count("all_reduce") == 1);  // g in the row-parallel layer
  CHECK(tp.count("all_gather") == 0);
  CHECK(differs(yt, y) == "");
  tp.reset();
  backward(yt, w);
  CHECK(tp.count("all_reduce") == 1);  // f in the column-parallel layer
  CHECK(tp.count("all_gather") == 0);
  CHECK(differs(xt.grad(), x.grad()) == "");
  CHECK(differs(gather_along(column->weight().grad(), 0, tp), fc.weight().grad()) == "");
  CHECK(differs(gather_along(row->weight().grad(), 1, tp), proj.weight().grad()) == "");
}

TEST_CASE("column parallel: f runs no collective forward and one all-reduce backward; row parallel: g the reverse") {
  CountingCommunicator tp(world()->dup());
  Generator init(41), data(42);
  ColumnParallelLinear column(5, 2 * tp.size(), true, tp, init, {.gather_output = false});
  RowParallelLinear row(2 * tp.size(), 5, true, tp, init, {.input_is_parallel = true});
  const Tensor x = leaf_copy(randn({3, 5}, data));
  tp.reset();
  const Tensor y = column(x);
  CHECK(tp.count("all_reduce") == 0);
  backward(sum(y));
  CHECK(tp.count("all_reduce") == 1);
  const Tensor part = leaf_copy(randn({3, 2}, data));
  tp.reset();
  const Tensor z = row(part);
  CHECK(tp.count("all_reduce") == 1);
  backward(sum(z));
  CHECK(tp.count("all_reduce") == 1);
  CHECK(tp.count("all_gather") == 0);
  // With gather_output: one all-gather forward, and backward still the one all-reduce of f.
  ColumnParallelLinear gathering(5, 2 * tp.size(), true, tp, init, {.gather_output = true});
  tp.reset();
  const Tensor full = gathering(x);
  CHECK(tp.count("all_gather") == 1);
  CHECK(collectives_run(tp) == 1);
  tp.reset();
  backward(sum(full * full));
  CHECK(tp.count("all_reduce") == 1);
  CHECK(collectives_run(tp) == 1);
}

TEST_CASE("a parallel layer built from a Generator holds the slice of the full layer drawn from the same seed") {
  TpGroups groups;
  for (Communicator* tp : groups.all) {
    INFO("rank ", tp->rank(), " of ", tp->size());
    const int r = tp->rank(), n = tp->size();
    Generator full_gen(51), tp_gen(51);
    nn::Linear fc(6, 2 * n, true, full_gen);
    nn::Linear proj(2 * n, 6, true, full_gen);
    nn::Embedding table(3 * n + 1, 4, full_gen, 0.02);
    ColumnParallelLinear column(6, 2 * n, true, *tp, tp_gen);
    RowParallelLinear row(2 * n, 6, true, *tp, tp_gen);
    VocabParallelEmbedding embedding(3 * n + 1, 4, *tp, tp_gen, {.init_std = 0.02});
    CHECK(full_gen.state() == tp_gen.state());  // the next layer draws what it would in the full model
    CHECK(differs(column.weight(), nograd::narrow(fc.weight(), 0, 2 * r, 2), 0.0) == "");
    CHECK(differs(column.bias(), nograd::narrow(fc.bias(), 0, 2 * r, 2), 0.0) == "");
    CHECK(differs(row.weight(), nograd::narrow(proj.weight(), 1, 2 * r, 2), 0.0) == "");
    CHECK(differs(row.bias(), proj.bias(), 0.0) == "");
    const nn::parallel::VocabRange range = embedding.range();
    CHECK(range.per_rank == 4);  // 3 n + 1 rows padded to 4 n
    CHECK(differs(nograd::narrow(embedding.weight(), 0, 0, range.valid),
                  nograd::narrow(table.weight(), 0, range.start, range.valid), 0.0) == "");
  }
}

TEST_CASE("ColumnParallelLinear with fused blocks takes this rank's part of each block (q, k, v of its heads)") {
  TpGroups groups;
  for (Communicator* tp : groups.all) {
    INFO("rank ", tp->rank(), " of ", tp->size());
    const int64_t c = 2 * tp->size(), part = 2;
    Generator init(61);
    nn::Linear qkv(4, 3 * c, true, init);
    auto column = ColumnParallelLinear::from_full(qkv, *tp, {.gather_output = false, .fused_blocks = 3});
    for (int64_t b = 0; b < 3; ++b)
      CHECK(differs(nograd::narrow(column->weight(), 0, b * part, part),
                    nograd::narrow(qkv.weight(), 0, b * c + tp->rank() * part, part), 0.0) == "");
    CHECK(mentions(test_support::error_of([&] {
                     ColumnParallelLinear::from_full(qkv, *tp, {.gather_output = true, .fused_blocks = 3});
                   }),
                   {"ColumnParallelLinear", "gather_output", "fused_blocks 1"}));
  }
}

TEST_CASE("VocabParallelEmbedding equals the full Embedding, for a vocab that divides by tp and one padded to it") {
  TpGroups groups;
  for (Communicator* tp : groups.all) {
    for (const int64_t vocab : {4 * int64_t{tp->size()}, 4 * int64_t{tp->size()} - 1}) {
      for (const bool padding_row : {false, true}) {
        INFO("rank ", tp->rank(), " of ", tp->size(), ", vocab ", vocab, ", padding_idx ", padding_row);
        Generator init(71);
        nn::EmbeddingOptions options{.init_std = 1.0};
        if (padding_row) options.padding_idx = 2;
        nn::Embedding full(vocab, 5, init, options);
        auto embedding = VocabParallelEmbedding::from_full(full, *tp);
        // Every id twice, in an order that mixes the ranks' ranges.
        std::vector<int64_t> ids;
        for (int64_t i = 0; i < 2 * vocab; ++i) ids.push_back((7 * i + 3) % vocab);
        const Tensor index = from_vector(ids, {2, vocab});
        Generator data(72);
        const Tensor w = randn({2, vocab, 5}, data);
        const Tensor y = full(index);
        backward(y, w);
        const Tensor yt = (*embedding)(index);
        CHECK(differs(yt, y) == "");
        backward(yt, w);
        // The ranks' tables stacked are the full table with the padding rows at the end, which learn nothing.
        const Tensor grads = gather_along(embedding->weight().grad(), 0, *tp);
        CHECK(differs(nograd::narrow(grads, 0, 0, vocab), full.weight().grad()) == "");
        const int64_t padded = grads.size(0) - vocab;
        if (padded > 0) CHECK(differs(nograd::narrow(grads, 0, vocab, padded), zeros({padded, 5}), 0.0) == "");
        CHECK(mentions(test_support::error_of([&] { (*embedding)(from_vector(std::vector<int64_t>{0, vocab})); }),
                       {"VocabParallelEmbedding", "[0, " + std::to_string(vocab) + ")"}));
      }
    }
  }
}

TEST_CASE("VocabParallelEmbedding runs one all-reduce forward and none backward") {
  CountingCommunicator tp(world()->dup());
  Generator init(81);
  VocabParallelEmbedding embedding(4 * tp.size(), 3, tp, init);
  tp.reset();
  const Tensor y = embedding(from_vector(std::vector<int64_t>{0, 5, 2, 4 * tp.size() - 1}));
  CHECK(tp.count("all_reduce") == 1);
  tp.reset();
  backward(sum(y * y));
  CHECK(tp.count("all_reduce") == 0);
  CHECK(tp.count("all_gather") == 0);
}

TEST_CASE("sizes that do not divide by tp and inputs of the wrong shape are refused, naming the values") {
  TpGroups groups;
  for (Communicator* tp : groups.all) {
    const int n = tp->size();
    const std::string size = std::to_string(n), odd = std::to_string(2 * n + 1);
    Generator init(91);
    CHECK(mentions(test_support::error_of([&] { ColumnParallelLinear(4, 2 * n + 1, true, *tp, init); }),
                   {"ColumnParallelLinear", "out_features " + odd, "tensor-parallel size " + size}));
    CHECK(mentions(test_support::error_of([&] { RowParallelLinear(2 * n + 1, 4, true, *tp, init); }),
                   {"RowParallelLinear", "in_features " + odd, "tensor-parallel size " + size}));
    CHECK(mentions(test_support::error_of([&] {
                     ColumnParallelLinear(4, 6 * n, true, *tp, init, {.gather_output = false, .fused_blocks = 4});
                   }),
                   {"ColumnParallelLinear", "out_features " + std::to_string(6 * n), "fused_blocks 4"}));
    ColumnParallelLinear column(4, 2 * n, true, *tp, init);
    CHECK(mentions(test_support::error_of([&] { column(zeros({3, 5})); }),
                   {"ColumnParallelLinear", "[..., 4]", "[3, 5]"}));
    RowParallelLinear row(2 * n, 4, true, *tp, init, {.input_is_parallel = true});
    CHECK(mentions(test_support::error_of([&] { row(zeros({3, 2 * n})); }),
                   {"RowParallelLinear", "[..., 2]", "input_is_parallel", "[3, " + std::to_string(2 * n) + "]"}));
  }
}

}  // namespace test
