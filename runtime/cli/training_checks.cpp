// The training checks of `accel test`. Both sides see the same samples in the same steps: a
// prepared loader gives rank r positions [s G + r b, s G + (r + 1) b) of the epoch's order, and the
// one-process loader, with batches of G = b N from the same seed, gives all of [s G, (s + 1) G).
#include "runtime/cli/training_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "kernels/error.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/sequential.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "runtime/accelerator.h"
#include "runtime/data_loader.h"
#include "runtime/dataset.h"
#include "tensor/creation.h"

namespace accel {

namespace {

// N ranks and one process add the same numbers in different orders; 1e-5 is far above that rounding
// and far below what one wrong gradient does to these weights.
constexpr double kTolerance = 1e-5;

// 6 -> 16 -> 3 with tanh.
std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed) {
  Generator gen(seed);
  auto mlp = std::make_shared<nn::Sequential>();
  mlp->push_back(std::make_shared<nn::Linear>(6, 16, true, gen));
  mlp->push_back(std::make_shared<nn::Tanh>());
  mlp->push_back(std::make_shared<nn::Linear>(16, 3, true, gen));
  return mlp;
}

// samples rows of x ~ N(0, 1) with targets tanh(x W), the same on every rank.
std::shared_ptr<TensorDataset> make_data(int64_t samples) {
  Generator gen(2024);
  const Tensor x = randn({samples, 6}, gen);
  const Tensor w = randn({6, 3}, gen);
  return std::make_shared<TensorDataset>(std::vector<Tensor>{x, tanh(matmul(x, w))});
}

std::shared_ptr<optim::Optimizer> make_optimizer(const std::string& kind, const std::vector<Tensor>& params) {
  if (kind == "sgd") return std::make_shared<optim::SGD>(params, optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  if (kind == "adamw") return std::make_shared<optim::AdamW>(params, optim::AdamWOptions{.lr = 1e-2});
  throw Error(fmt::format("make_optimizer: unknown optimizer '{}'; expected sgd or adamw", kind));
}

std::vector<float> weights_of(const nn::Module& model) {
  std::vector<float> out;
  for (const Tensor& p : model.parameters()) {
    const std::vector<float> v = p.to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// The one-process run: batches of global_batch from the unsharded loader, a plain backward and step.
std::vector<float> train_reference(const std::string& optimizer, int64_t samples, int64_t global_batch,
                                   int epochs, uint64_t seed) {
  auto model = make_mlp(seed);
  auto opt = make_optimizer(optimizer, model->parameters());
  DataLoader data(make_data(samples), {.batch_size = global_batch, .shuffle = true, .seed = 5});
  for (int epoch = 0; epoch < epochs; ++epoch) {
    data.set_epoch(epoch);
    for (const Batch& batch : data) {
      opt->zero_grad();
      backward(nn::mse_loss((*model)(batch[0]), batch[1]));
      opt->step();
    }
  }
  return weights_of(*model);
}

// What is wrong with trained (this rank's weights) against the reference and the start: "" if nothing.
// Collective: gathers every rank's weights to compare them bit for bit.
std::string compare(Accelerator& accelerator, const std::vector<float>& trained, const std::vector<float>& reference,
                    const std::vector<float>& initial) {
  std::vector<std::string> problems;
  double off = 0, moved = 0;
  for (size_t i = 0; i < trained.size(); ++i) {
    off = std::max(off, std::abs(static_cast<double>(trained[i]) - reference[i]));
    moved = std::max(moved, std::abs(static_cast<double>(reference[i]) - initial[i]));
  }
  if (!(off <= kTolerance))
    problems.push_back(fmt::format("weights differ from the one-process run by up to {:.3g} (tolerance {})", off,
                                   kTolerance));
  if (!(moved > 1e-3))
    problems.push_back(fmt::format("the one-process run moved the weights by only {:.3g}, so it proves nothing", moved));
  const Tensor all = accelerator.gather(from_vector(trained));
  const int64_t n = static_cast<int64_t>(trained.size());
  const float* p = all.data<float>();
  for (int r = 1; r < accelerator.num_processes(); ++r)
    if (std::memcmp(p, p + r * n, static_cast<size_t>(n) * sizeof(float)) != 0)
      problems.push_back(fmt::format("rank {}'s weights are not bitwise equal to rank 0's", r));
  std::string text;
  for (const std::string& problem : problems) text += (text.empty() ? "" : "; ") + problem;
  return text;
}

}  // namespace

void check_training(Accelerator& accelerator, CheckList& checks) {
  const int ranks = accelerator.num_processes();
  const int64_t per_rank = 4, steps_per_epoch = 3, samples = per_rank * ranks * steps_per_epoch;
  const int epochs = 2;
  for (const std::string optimizer : {"sgd", "adamw"}) {
    checks.run(fmt::format("train {}: {} steps on {} rank(s) equal one process on the global batch", optimizer,
                           epochs * steps_per_epoch, ranks),
               [&] {
                 const uint64_t seed = 31;
                 // Each rank starts elsewhere; prepare() must give them all rank 0's weights.
                 auto model = make_mlp(seed + static_cast<uint64_t>(accelerator.process_index()));
                 auto opt = make_optimizer(optimizer, model->parameters());
                 DataLoader loader(make_data(samples), {.batch_size = per_rank, .shuffle = true, .seed = 5});
                 auto [net, prepared_opt, data] = accelerator.prepare(model, opt, loader);
                 for (int epoch = 0; epoch < epochs; ++epoch) {
                   data.set_epoch(epoch);
                   for (const Batch& batch : data) {
                     prepared_opt->zero_grad();
                     accelerator.backward(nn::mse_loss((*net)(batch[0]), batch[1]));
                     prepared_opt->step();
                   }
                 }
                 return compare(accelerator, weights_of(*net),
                                train_reference(optimizer, samples, per_rank * ranks, epochs, seed),
                                weights_of(*make_mlp(seed)));
               });
  }
}

void check_accumulation(int k, CheckList& checks) {
  if (k < 2) throw Error(fmt::format("check_accumulation: k is {}; expected at least 2 micro-batches a window", k));
  AcceleratorOptions options;
  options.print_settings = false;
  options.gradient_accumulation_steps = k;
  // 2 k + 1 micro-batches of 2 samples per rank an epoch: two full windows, then a window of one.
  const int64_t micro = 2;
  checks.run(fmt::format("accumulate: {} micro-batches a window (the last one short) equal one batch {} times larger",
                         k, k),
             [&] {
               Accelerator accelerator(options);
               const int ranks = accelerator.num_processes();
               const int64_t samples = micro * ranks * (2 * k + 1);
               const int epochs = 2;
               const uint64_t seed = 47;
               auto model = make_mlp(seed + static_cast<uint64_t>(accelerator.process_index()));
               auto opt = make_optimizer("adamw", model->parameters());
               DataLoader loader(make_data(samples), {.batch_size = micro, .shuffle = true, .seed = 5});
               auto [net, prepared_opt, data] = accelerator.prepare(model, opt, loader);
               int64_t syncs = 0;
               for (int epoch = 0; epoch < epochs; ++epoch) {
                 data.set_epoch(epoch);
                 for (const Batch& batch : data) {
                   auto scope = accelerator.accumulate();
                   prepared_opt->zero_grad();
                   accelerator.backward(nn::mse_loss((*net)(batch[0]), batch[1]));
                   syncs += accelerator.sync_gradients() ? 1 : 0;
                   prepared_opt->step();
                 }
               }
               std::string problem = compare(accelerator, weights_of(*net),
                                             train_reference("adamw", samples, micro * ranks * k, epochs, seed),
                                             weights_of(*make_mlp(seed)));
               if (syncs != 3 * epochs)
                 problem += fmt::format("{}gradients synced on {} micro-batches; expected {} (3 windows an epoch)",
                                        problem.empty() ? "" : "; ", syncs, 3 * epochs);
               return problem;
             });
}

}  // namespace accel
