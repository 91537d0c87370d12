// Data-parallel training equals one-process training: N ranks with the same global batch, and k
// accumulated micro-batches against one batch k times larger (with a short last window).
#include "support.h"

namespace test {

TEST_CASE("N ranks train to the same weights as one process with the same global batch, over 100 steps") {
  const int n = world()->size();
  for (const std::string backend : {"mpi", "ring"}) {
    for (const std::string optimizer : {"sgd", "adamw"}) {
      INFO("rank ", world()->rank(), " of ", n, ", backend ", backend, ", ", optimizer);
      // 320 samples in global batches of 32 (32 / n per rank): 10 steps an epoch, 10 epochs.
      const TrainSpec spec{.optimizer = optimizer, .samples = 320, .batch_size = 32, .epochs = 10};
      // Every rank initialises differently (seed + rank); prepare starts them all from rank 0's.
      const std::vector<double> trained = train_with_accelerator(spec, backend, /*split_batches=*/true, 11);
      const std::vector<double> reference = train_reference(spec, 11);
      const std::vector<double> initial = weights_of(*make_mlp(11));
      CHECK(max_abs_diff(reference, initial) > 1e-2);  // the training moved the weights
      CHECK(max_abs_diff(trained, reference) <= 1e-5);
      CHECK(differs_across_ranks(trained) == "");
    }
  }
}

TEST_CASE("k accumulated micro-batches equal one batch k times larger, including a short last window") {
  const int n = world()->size();
  for (const std::string optimizer : {"sgd", "adamw"}) {
    for (const bool zero_grad_first : {true, false}) {
      INFO("rank ", world()->rank(), " of ", n, ", ", optimizer, ", zero_grad ", zero_grad_first ? "first" : "last");
      // 40 samples, 2 per rank per micro-batch, windows of 3: 40 / (2n) micro-batches per epoch
      // (20, 10 or 5 for n = 1, 2, 4), so each epoch ends with a window of 2, 1 or 2.
      const int k = 3;
      const TrainSpec micro{.optimizer = optimizer,
                            .samples = 40,
                            .batch_size = 2,
                            .epochs = 3,
                            .accumulation_steps = k,
                            .zero_grad_first = zero_grad_first};
      REQUIRE((40 / (2 * n)) % k != 0);
      const std::vector<double> trained = train_with_accelerator(micro, "auto", /*split_batches=*/false, 5);
      // One process, batches of k * 2 * n: the same windows of samples, the last one short too.
      TrainSpec big = micro;
      big.batch_size = 2 * n * k;
      big.accumulation_steps = 1;
      const std::vector<double> reference = train_reference(big, 5);
      CHECK(max_abs_diff(reference, weights_of(*make_mlp(5))) > 1e-2);
      CHECK(max_abs_diff(trained, reference) <= 1e-5);
      CHECK(differs_across_ranks(trained) == "");
    }
  }
}

TEST_CASE("accumulation: the optimizer steps once per window and sync_gradients marks the window's end") {
  AcceleratorOptions o = options();
  o.gradient_accumulation_steps = 4;
  Accelerator accelerator(o);
  const int n = accelerator.num_processes();
  auto model = make_mlp(2);
  auto adamw = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{});
  // 10 micro-batches per epoch on every rank: windows of 4, 4 and 2.
  DataLoader loader(regression_data(10 * n), {.batch_size = 1});
  auto [net, opt, data] = accelerator.prepare(model, adamw, loader);
  std::vector<bool> syncs;
  for (const Batch& batch : data) {
    auto scope = accelerator.accumulate();
    syncs.push_back(accelerator.sync_gradients());
    opt->zero_grad();
    accelerator.backward(nn::mse_loss((*net)(batch[0]), batch[1]));
    opt->step();
  }
  CHECK(syncs == std::vector<bool>{false, false, false, true, false, false, false, true, false, true});
  const optim::StateDict state = opt->state_dict();
  REQUIRE(state.size() > 1);
  CHECK(state[1].first == "state.0.step");
  CHECK(state[1].second.item() == 3);

  // Without a prepared loader, every k-th accumulate() closes a window.
  std::vector<bool> counted;
  for (int i = 0; i < 8; ++i) {
    auto scope = accelerator.accumulate();
    counted.push_back(accelerator.sync_gradients());
  }
  CHECK(counted == std::vector<bool>{false, false, false, true, false, false, false, true});
  CHECK(error_of([&] {
          auto outer = accelerator.accumulate();
          auto inner = accelerator.accumulate();
        }) == "Accelerator::accumulate: already inside an accumulate() scope");
}

}  // namespace test
