// Uneven data: 1,001 samples do not divide into the ranks' batches. With even_batches every rank
// runs the same number of steps (nothing hangs), and gather_for_metrics drops the padding so each
// sample is counted exactly once.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "support.h"

namespace test {

TEST_CASE("1,001 samples: every rank runs the same steps and gather_for_metrics returns each sample once") {
  Accelerator accelerator(options());
  const int n = accelerator.num_processes();
  const int64_t samples = 1001, batch_size = 10;
  Generator gen(9);
  const Tensor x = randn({samples, 8}, gen);
  const Tensor ids = arange(samples);
  auto model = make_mlp(4);
  auto sgd = std::make_shared<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.01});
  DataLoader loader(std::make_shared<TensorDataset>(std::vector<Tensor>{x, ids}),
                    {.batch_size = batch_size, .shuffle = true, .seed = 3});
  auto [net, opt, data] = accelerator.prepare(model, sgd, loader);

  for (int epoch = 0; epoch < 2; ++epoch) {
    INFO("rank ", accelerator.process_index(), " of ", n, ", epoch ", epoch);
    data.set_epoch(epoch);
    int64_t steps = 0;
    std::vector<int64_t> seen;
    std::vector<float> rows, predictions;
    for (const Batch& batch : data) {
      opt->zero_grad();
      const Tensor out = (*net)(batch[0]);
      accelerator.backward(mean(out * out));  // a collective every step: a rank short of steps would hang
      opt->step();
      ++steps;
      NoGradGuard no_grad;
      const Tensor all_ids = accelerator.gather_for_metrics(batch[1]);
      const Tensor all_rows = accelerator.gather_for_metrics(batch[0]);
      const Tensor all_out = accelerator.gather_for_metrics(out);
      REQUIRE(all_ids.size(0) == all_rows.size(0));
      REQUIRE(all_ids.size(0) == all_out.size(0));
      for (int64_t id : all_ids.to_vector<int64_t>()) seen.push_back(id);
      for (float v : all_rows.to_vector<float>()) rows.push_back(v);
      for (float v : all_out.to_vector<float>()) predictions.push_back(v);
    }
    // Every rank ran ceil(1001 / (10 n)) steps.
    const int64_t expected_steps = (samples + batch_size * n - 1) / (batch_size * n);
    for (double s : all_ranks(static_cast<double>(steps))) CHECK(s == expected_steps);
    // Exactly the 1,001 samples, each once, with their own rows.
    REQUIRE(seen.size() == static_cast<size_t>(samples));
    std::vector<int64_t> sorted = seen;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> all(static_cast<size_t>(samples));
    std::iota(all.begin(), all.end(), int64_t{0});
    CHECK(sorted == all);
    const std::vector<float> xs = x.to_vector<float>();
    int64_t wrong_rows = 0;
    for (size_t i = 0; i < seen.size(); ++i)
      for (size_t c = 0; c < 8; ++c) wrong_rows += rows[i * 8 + c] != xs[static_cast<size_t>(seen[i]) * 8 + c];
    CHECK(wrong_rows == 0);
    CHECK(predictions.size() == static_cast<size_t>(samples) * 4);
  }

  // The last step's predictions are the model's outputs for those samples: recompute them here.
  NoGradGuard no_grad;
  const int64_t last = data.size() - 1;
  const Batch batch = data.batch(last);
  const Tensor gathered_ids = accelerator.gather_for_metrics(batch[1]);
  const Tensor gathered = accelerator.gather_for_metrics((*net)(batch[0]));
  const Tensor expected = (*net)(index_select(x, 0, gathered_ids));
  CHECK(gathered.shape() == expected.shape());
  const std::vector<float> got = gathered.to_vector<float>(), want = expected.to_vector<float>();
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(got[i] - want[i])));
  CHECK(worst <= 1e-6);
  // 1001 = 10 n (steps - 1) + the last step's real samples.
  CHECK(gathered_ids.size(0) == samples - batch_size * n * last);
}

}  // namespace test
