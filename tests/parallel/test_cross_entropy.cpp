// vocab_parallel_cross_entropy against nn::cross_entropy of the full logits on the same data: the loss
// and the logits' grad (each rank's columns of it), for every reduction, with ignored targets, and for
// vocabularies padded up to a multiple of tp, whose padding columns (filled with values that would
// dominate the loss if they counted) get no grad, and with per-class weights and label smoothing;
// f64 gradcheck; exactly three all-reduces forward; bad options refused.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "../error_of.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"
#include "tp_support.h"

namespace test {

namespace {

using nn::parallel::vocab_parallel_cross_entropy;
using nn::parallel::VocabParallelCrossEntropyOptions;

// This rank's shard of full logits [..., vocab]: its columns of the vocab padded to a multiple of the
// group, the padding columns filled with `padding`.
Tensor shard_of(const Tensor& full, const Communicator& tp, double padding = 50.0) {
  const nn::parallel::VocabRange range = nn::parallel::vocab_range(full.size(-1), tp.rank(), tp.size());
  Shape shape = full.shape();
  shape.back() = range.per_rank;
  Tensor shard = accel::full(shape, padding, full.dtype());
  if (range.valid > 0)
    nograd::copy_(nograd::narrow(shard, -1, 0, range.valid), nograd::narrow(full, -1, range.start, range.valid));
  shard.requires_grad_();
  return shard;
}

// Targets [2, 3] in [0, vocab), the same on every rank, with the positions in `ignored` set to ignore_index.
Tensor targets(int64_t vocab, int64_t ignore_index, const std::vector<int64_t>& ignored) {
  std::vector<int64_t> t;
  for (int64_t i = 0; i < 6; ++i) t.push_back((5 * i + 1) % vocab);
  for (int64_t i : ignored) t[static_cast<size_t>(i)] = ignore_index;
  return from_vector(t, {2, 3});
}

std::string reduction_name(Reduction r) {
  return r == Reduction::mean ? "mean" : r == Reduction::sum ? "sum" : "none";
}

// The vocab-parallel loss equals the full one, the same on every rank; after a backward of each from
// seed (undefined for a scalar loss) the shards' grads, joined, equal the full logits' grad and are
// zero over the padding columns.
void check_loss_and_grads(const Tensor& loss, const Tensor& expected, const Tensor& shard, const Tensor& full,
                          Communicator& tp, int64_t vocab, const Tensor& seed) {
  CHECK(differs(loss, expected) == "");
  CHECK(differs_across_ranks(loss, tp) == "");
  backward(expected, seed);
  backward(loss, seed);
  const Tensor grads = gather_along(shard.grad(), -1, tp);
  CHECK(differs(nograd::narrow(grads, -1, 0, vocab), full.grad()) == "");
  const int64_t padded = grads.size(-1) - vocab;
  if (padded > 0) CHECK(differs(nograd::narrow(grads, -1, vocab, padded), zeros({2, 3, padded}), 0.0) == "");
}

}  // namespace

TEST_CASE("vocab-parallel cross-entropy equals nn::cross_entropy of the full logits: loss and logits grad") {
  TpGroups groups;
  for (Communicator* tp : groups.all) {
    const int64_t n = tp->size();
    // Divisible; padded by one; so small that the last rank (of 4) holds padding only.
    for (const int64_t vocab : {4 * n, 4 * n - 1, n + 1}) {
      for (const Reduction reduction : {Reduction::mean, Reduction::sum, Reduction::none}) {
        // No target ignored; two ignored with the default index; a real class (1) used as ignore_index.
        for (const int64_t ignore_index : {int64_t{-100}, int64_t{1}}) {
          for (const std::vector<int64_t>& ignored : {std::vector<int64_t>{}, std::vector<int64_t>{1, 4}}) {
            INFO("rank ", tp->rank(), " of ", n, ", vocab ", vocab, ", ", reduction_name(reduction),
                 ", ignore_index ", ignore_index, ", ", ignored.size(), " ignored");
            Generator data(static_cast<uint64_t>(100 + vocab));
            Tensor full = randn({2, 3, vocab}, data) * 3.0;
            full.requires_grad_();
            const Tensor target = targets(vocab, ignore_index, ignored);
            const Tensor shard = shard_of(full, *tp);
            const Tensor loss = vocab_parallel_cross_entropy(
                shard, target, *tp, {.vocab_size = vocab, .ignore_index = ignore_index, .reduction = reduction});
            const Tensor expected = nn::cross_entropy(full, target, ignore_index, reduction);
            CHECK(loss.dtype() == expected.dtype());
            const Tensor seed = reduction == Reduction::none ? randn({2, 3}, data) : Tensor();
            check_loss_and_grads(loss, expected, shard, full, *tp, vocab, seed);
          }
        }
      }
    }
  }
}

TEST_CASE("vocab-parallel cross-entropy with class weights and label smoothing equals nn::cross_entropy with the "
          "same options: loss and logits grad") {
  TpGroups groups;
  for (Communicator* tp : groups.all) {
    const int64_t n = tp->size();
    for (const int64_t vocab : {4 * n, 4 * n - 1, n + 1}) {
      for (const Reduction reduction : {Reduction::mean, Reduction::sum, Reduction::none}) {
        for (const bool weighted : {false, true}) {
          for (const double eps : {0.0, 0.1, 1.0}) {
            if (!weighted && eps == 0.0) continue;  // the plain loss, the case above
            for (const std::vector<int64_t>& ignored : {std::vector<int64_t>{}, std::vector<int64_t>{1, 4}}) {
              INFO("rank ", tp->rank(), " of ", n, ", vocab ", vocab, ", ", reduction_name(reduction),
                   weighted ? ", weighted" : "", ", label_smoothing ", eps, ", ", ignored.size(), " ignored");
              Generator data(static_cast<uint64_t>(200 + vocab));
              Tensor full = randn({2, 3, vocab}, data) * 3.0;
              full.requires_grad_();
              // Positive weights from 0.25 to 2.25, the same on every rank.
              const Tensor weight = weighted ? rand({vocab}, data) * 2.0 + 0.25 : Tensor();
              const Tensor target = targets(vocab, -100, ignored);
              const Tensor shard = shard_of(full, *tp);
              const Tensor loss = vocab_parallel_cross_entropy(
                  shard, target, *tp,
                  {.vocab_size = vocab, .reduction = reduction, .weight = weight, .label_smoothing = eps});
              const Tensor expected = nn::cross_entropy(
                  full, target, {.weight = weight, .reduction = reduction, .label_smoothing = eps});
              const Tensor seed = reduction == Reduction::none ? randn({2, 3}, data) : Tensor();
              check_loss_and_grads(loss, expected, shard, full, *tp, vocab, seed);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("vocab-parallel cross-entropy: a mean over nothing (every target ignored) is 0 with a 0 grad") {
  TpGroups groups;
  for (Communicator* tp : groups.all) {
    Generator data(5);
    const Tensor full = randn({2, 3, 2 * tp->size()}, data);
    const Tensor shard = shard_of(full, *tp);
    const Tensor loss = vocab_parallel_cross_entropy(shard, full_like(zeros({2, 3}, DType::i64), -100.0), *tp);
    CHECK(loss.item() == 0.0);
    backward(loss);
    CHECK(differs(shard.grad(), zeros_like(shard), 0.0) == "");
    // Weighted and smoothed, and a mean over targets whose weights are all 0, as nn::cross_entropy's.
    const int64_t vocab = 2 * tp->size();
    const Tensor all_ignored = vocab_parallel_cross_entropy(
        shard, full_like(zeros({2, 3}, DType::i64), -100.0), *tp,
        {.weight = rand({vocab}, data) + 0.5, .label_smoothing = 0.1});
    CHECK(all_ignored.item() == 0.0);
    Tensor weight = ones({vocab});
    nograd::fill_(nograd::narrow(weight, 0, 0, 1), 0.0);  // every target below is class 0
    const Tensor zero_weight = vocab_parallel_cross_entropy(shard, zeros({2, 3}, DType::i64), *tp, {.weight = weight});
    CHECK(zero_weight.item() == 0.0);
    CHECK(nn::cross_entropy(full, zeros({2, 3}, DType::i64), {.weight = weight}).item() == 0.0);
  }
}

TEST_CASE("vocab-parallel cross-entropy passes gradcheck in f64 (each rank's shard, the loss replicated)") {
  TpGroups groups;
  for (Communicator* tp : groups.all) {
    INFO("rank ", tp->rank(), " of ", tp->size());
    const int64_t vocab = 2 * tp->size() + 1;  // padded
    const Tensor target = targets(vocab, -100, {2});
    Generator data(6);
    const Tensor full = randn({2, 3, vocab}, data, DType::f64);
    const Tensor shard = nograd::clone(shard_of(full, *tp, 0.5));
    const Tensor weight = rand({vocab}, data, DType::f64) + 0.5;
    for (const Reduction reduction : {Reduction::mean, Reduction::none}) {
      for (const bool smoothed : {false, true}) {
        INFO(reduction_name(reduction), smoothed ? ", weighted and smoothed" : "");
        auto f = [&](const Tensor& logits) {
          VocabParallelCrossEntropyOptions options{.vocab_size = vocab, .reduction = reduction};
          if (smoothed) {
            options.weight = weight;
            options.label_smoothing = 0.2;
          }
          return vocab_parallel_cross_entropy(logits, target, *tp, options);
        };
        CHECK(tp_gradcheck(f, *tp, shard, Spread::per_rank, Spread::replicated) == "");
      }
    }
  }
}

TEST_CASE("vocab-parallel cross-entropy runs exactly three all-reduces forward (max, target logit, sum of exp) and "
          "nothing backward") {
  CountingCommunicator tp(world()->dup());
  const int64_t vocab = 3 * tp.size() - 1;
  Generator data(7);
  const Tensor shard = shard_of(randn({2, 3, vocab}, data), tp);
  tp.reset();
  const Tensor loss = vocab_parallel_cross_entropy(shard, targets(vocab, -100, {0}), tp, {.vocab_size = vocab});
  CHECK(tp.count("all_reduce") == 3);
  CHECK(collectives_run(tp) == 3);
  tp.reset();
  backward(loss);
  CHECK(collectives_run(tp) == 0);
  // Weights and smoothing add no collective: the weighted sum of logits travels with the target logit.
  tp.reset();
  const Tensor smoothed = vocab_parallel_cross_entropy(
      shard, targets(vocab, -100, {0}), tp, {.vocab_size = vocab, .weight = ones({vocab}), .label_smoothing = 0.1});
  CHECK(tp.count("all_reduce") == 3);
  CHECK(collectives_run(tp) == 3);
  tp.reset();
  backward(smoothed);
  CHECK(collectives_run(tp) == 0);
}

TEST_CASE("vocab-parallel cross-entropy refuses targets outside the vocab, a vocab larger than the shards, "
          "mismatched shapes, a label_smoothing outside [0, 1] and a weight not [vocab_size]") {
  TpGroups groups;
  for (Communicator* tp : groups.all) {
    const int64_t n = tp->size(), vocab = 2 * n - 1;
    Generator data(8);
    const Tensor shard = shard_of(randn({2, 3, vocab}, data), *tp);
    const std::string padding_target = test_support::error_of([&] {
      vocab_parallel_cross_entropy(shard, full_like(zeros({2, 3}, DType::i64), static_cast<double>(vocab)), *tp,
                                   {.vocab_size = vocab});
    });
    const std::string v = std::to_string(vocab);
    CHECK(padding_target.find("vocab_parallel_cross_entropy: target " + v + " at row 0 is outside [0, " + v + ")") !=
          std::string::npos);
    const std::string too_big = test_support::error_of([&] {
      vocab_parallel_cross_entropy(shard, targets(vocab, -100, {}), *tp, {.vocab_size = 2 * n + 1});
    });
    const int64_t padded = shard.size(-1) * n;  // 2n, or 1 alone
    CHECK(too_big.find("vocab_size " + std::to_string(2 * n + 1) + " must be in (0, " + std::to_string(padded) + "]") !=
          std::string::npos);
    const std::string shapes = test_support::error_of([&] {
      vocab_parallel_cross_entropy(shard, zeros({3, 2}, DType::i64), *tp, {.vocab_size = vocab});
    });
    CHECK(shapes.find("target [3, 2] must be logits_shard " + shape_str(shard.shape()) + " without the class dim") !=
          std::string::npos);
    const std::string smoothing = test_support::error_of([&] {
      vocab_parallel_cross_entropy(shard, targets(vocab, -100, {}), *tp, {.vocab_size = vocab, .label_smoothing = 1.5});
    });
    CHECK(smoothing == "vocab_parallel_cross_entropy: label_smoothing must be in [0, 1], got 1.5");
    const std::string weight_shape = test_support::error_of([&] {
      vocab_parallel_cross_entropy(shard, targets(vocab, -100, {}), *tp, {.vocab_size = vocab, .weight = ones({2 * n})});
    });
    CHECK(weight_shape == fmt::format("vocab_parallel_cross_entropy: weight is f32 [{}] on cpu; expected a floating "
                                      "[{}] (one per class of the vocab_size {}, the same on every rank) on cpu, the "
                                      "logits' device",
                                      2 * n, vocab, vocab));
    const std::string weight_dtype = test_support::error_of([&] {
      vocab_parallel_cross_entropy(shard, targets(vocab, -100, {}), *tp,
                                   {.vocab_size = vocab, .weight = ones({vocab}, DType::i64)});
    });
    CHECK(weight_dtype.rfind("vocab_parallel_cross_entropy: weight is i64 [", 0) == 0);
  }
}

}  // namespace test
