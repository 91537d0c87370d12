// Accelerator::num_items and scale_sum_loss: with ignore_index targets spread unevenly over the ranks
// and over the micro-batches of a window (one micro-batch ignoring everything), the grads after the
// window equal one process's gradient of the mean over every counted target, inside accumulate() and
// with no_sync(); a plain per-micro-batch mean does not; the count costs one all-reduce per window.
#include "support.h"

namespace test {

namespace {

constexpr int64_t kRows = 6, kClasses = 4;

struct MicroBatch {
  Tensor x;  // [kRows, 8]
  Tensor y;  // [kRows] i64, ignored rows -100
  int64_t counted = 0;
};

// Rank r's micro-batch m of window w, the same on every rank that asks: between 0 and all kRows of
// its rows ignored (rank 1's second micro-batch of window 0 ignores all of them).
MicroBatch micro_batch(int window, int rank, int m) {
  Generator gen(1000 + 100 * static_cast<uint64_t>(window) + 10 * static_cast<uint64_t>(rank) + static_cast<uint64_t>(m));
  MicroBatch b;
  b.x = randn({kRows, 8}, gen);
  const int64_t ignored = (3 * rank + 2 * m + 1 + window) % (kRows + 1);
  std::vector<int64_t> y(kRows);
  for (int64_t i = 0; i < kRows; ++i) y[i] = i < ignored ? -100 : (i * 7 + rank + m + window) % kClasses;
  b.y = from_vector(y);
  b.counted = kRows - ignored;
  return b;
}

Tensor sum_loss(nn::Module& model, const MicroBatch& b) {
  return nn::cross_entropy(model.forward(b.x), b.y, -100, Reduction::sum);
}

std::vector<double> grads_of(const nn::Module& model) {
  std::vector<double> out;
  for (const Tensor& p : model.parameters()) {
    REQUIRE(p.grad().defined());
    for (const float v : p.grad().to_vector<float>()) out.push_back(v);
  }
  return out;
}

// One process, no Accelerator: the gradient of the mean over every rank's and micro-batch's counted
// targets, in one cross-entropy over all the rows.
std::vector<double> reference_grads(int window, int world_size, int k) {
  auto model = make_mlp(21);
  std::vector<Tensor> xs, ys;
  for (int r = 0; r < world_size; ++r)
    for (int m = 0; m < k; ++m) {
      const MicroBatch b = micro_batch(window, r, m);
      xs.push_back(b.x);
      ys.push_back(b.y);
    }
  accel::backward(nn::cross_entropy(model->forward(cat(xs, 0)), cat(ys, 0), -100, Reduction::mean));
  return grads_of(*model);
}

int64_t num_items_reductions(const Accelerator& accelerator) {
  if (!accelerator.communicator()) return 0;
  int64_t n = 0;
  for (const LedgerEntry& e : accelerator.communicator()->ledger().entries())
    if (e.site == "num_items") {
      CHECK(e.op == "all_reduce");
      CHECK(e.count == 1);
      ++n;
    }
  return n;
}

}  // namespace

TEST_CASE("num_items + scale_sum_loss inside accumulate(): the window's grads are the global mean's, exactly") {
  const int n = world()->size(), rank = world()->rank(), k = 3;
  INFO("rank ", rank, " of ", n);
  AcceleratorOptions o = options();
  o.gradient_accumulation_steps = k;
  Accelerator accelerator(o);
  auto model = make_mlp(21);
  auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.0});
  auto [net, opt] = accelerator.prepare(model, optimizer);
  for (int window = 0; window < 2; ++window) {
    INFO("window ", window);
    int64_t local = 0, expected_total = 0;
    for (int m = 0; m < k; ++m) local += micro_batch(window, rank, m).counted;
    for (int r = 0; r < n; ++r)
      for (int m = 0; m < k; ++m) expected_total += micro_batch(window, r, m).counted;
    const int64_t before = num_items_reductions(accelerator);
    const int64_t total = accelerator.num_items(local);
    CHECK(total == expected_total);
    for (int m = 0; m < k; ++m) {
      auto scope = accelerator.accumulate();
      opt->zero_grad();
      accelerator.backward(accelerator.scale_sum_loss(sum_loss(*net, micro_batch(window, rank, m)), total));
      if (m == k - 1) {
        CHECK(accelerator.sync_gradients());
        CHECK(max_abs_diff(grads_of(*net), reference_grads(window, n, k)) <= 1e-6);
        CHECK(differs_across_ranks(grads_of(*net)) == "");
      }
      opt->step();
    }
    CHECK(num_items_reductions(accelerator) - before == (n > 1 ? 1 : 0));  // one per window, none with one process
  }
}

TEST_CASE("num_items + scale_sum_loss with no_sync() micro-steps; a per-micro-batch mean is not the global mean") {
  const int n = world()->size(), rank = world()->rank(), k = 3;
  INFO("rank ", rank, " of ", n);
  Accelerator accelerator(options());
  auto model = make_mlp(21);
  auto net = accelerator.prepare(model);
  int64_t local = 0;
  for (int m = 0; m < k; ++m) local += micro_batch(0, rank, m).counted;
  const int64_t total = accelerator.num_items(local);
  for (int m = 0; m < k; ++m) {
    const Tensor loss = accelerator.scale_sum_loss(sum_loss(*net, micro_batch(0, rank, m)), total);
    if (m < k - 1) {
      auto scope = accelerator.no_sync();
      accelerator.backward(loss);
    } else {
      accelerator.backward(loss);
    }
  }
  const std::vector<double> reference = reference_grads(0, n, k);
  CHECK(max_abs_diff(grads_of(*net), reference) <= 1e-6);

  // What the helper replaces: each micro-batch's own mean, averaged. Its micro-batches weigh alike
  // whatever they count (and the all-ignored one adds a zero), so it misses the global mean.
  net->zero_grad();
  for (int m = 0; m < k; ++m) {
    const Tensor loss = nn::cross_entropy(net->forward(micro_batch(0, rank, m).x), micro_batch(0, rank, m).y) / k;
    if (m < k - 1) {
      auto scope = accelerator.no_sync();
      accelerator.backward(loss);
    } else {
      accelerator.backward(loss);
    }
  }
  CHECK(max_abs_diff(grads_of(*net), reference) > 1e-3);
}

TEST_CASE("num_items refuses a negative count; scale_sum_loss over nothing is a zero loss") {
  Accelerator accelerator(options());
  CHECK(error_of([&] { accelerator.num_items(-1); }) ==
        "Accelerator::num_items: local_count is -1, expected >= 0 (this rank's items in the window)");
  const Tensor sum = full({}, 3.5);
  CHECK(accelerator.scale_sum_loss(sum, 0).item() == 0.0);
  CHECK(accelerator.scale_sum_loss(sum, 7 * world()->size()).item() == doctest::Approx(3.5 / 7));
  CHECK(error_of([&] { accelerator.scale_sum_loss(sum, -2); }).find("num_items is -2, expected >= 0") !=
        std::string::npos);
}

}  // namespace test
