// An MLP classifier on three interleaved spirals that the program draws itself, trained with
// mini-batches and AdamW; prints the held-out accuracy and loss in one parseable line.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include <accel.h>

#include "checkpoint_flags.h"
#include "tracking_flags.h"

using namespace accel;

namespace {

// Three spiral arms in the plane (the CS231n data set): arm k turns through [4k, 4k + 4] radians.
std::pair<Tensor, Tensor> spirals(int64_t per_class, double noise, Generator& gen) {
  const int64_t classes = 3, n = per_class * classes;
  const std::vector<float> jitter = randn({n}, gen).to_vector<float>();
  std::vector<float> points(static_cast<size_t>(2 * n));
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t k = 0; k < classes; ++k) {
    for (int64_t i = 0; i < per_class; ++i) {
      const int64_t row = k * per_class + i;
      const double r = static_cast<double>(i) / static_cast<double>(per_class - 1);
      const double t = 4.0 * static_cast<double>(k) + 4.0 * r + noise * jitter[row];
      points[2 * row] = static_cast<float>(r * std::sin(t));
      points[2 * row + 1] = static_cast<float>(r * std::cos(t));
      labels[row] = k;
    }
  }
  return {from_vector(points, {n, 2}), from_vector(labels)};
}

std::shared_ptr<nn::Sequential> make_mlp(int64_t hidden, Generator& gen) {
  auto mlp = std::make_shared<nn::Sequential>();
  mlp->push_back(std::make_shared<nn::Linear>(2, hidden, true, gen));
  mlp->push_back(std::make_shared<nn::ReLU>());
  mlp->push_back(std::make_shared<nn::Linear>(hidden, hidden, true, gen));
  mlp->push_back(std::make_shared<nn::ReLU>());
  mlp->push_back(std::make_shared<nn::Linear>(hidden, 3, true, gen));
  return mlp;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Classify three spirals with an MLP (2-H-H-3, ReLU) trained by AdamW"};
  int epochs = 60;
  int64_t batch_size = 32, hidden = 64, per_class = 500;
  double lr = 1e-2;
  uint64_t seed = 0;
  std::string init_path, save_dir;
  app.add_option("--epochs", epochs, "Passes over the training split")->capture_default_str();
  app.add_option("--batch-size", batch_size, "Samples per step (per process)")->capture_default_str();
  app.add_option("--lr", lr, "AdamW learning rate")->capture_default_str();
  app.add_option("--seed", seed, "Seed of the data, the split, the weights and the shuffle")->capture_default_str();
  app.add_option("--hidden", hidden, "Hidden width")->capture_default_str();
  app.add_option("--init", init_path, "Initial weights from a safetensors file");
  app.add_option("--save", save_dir, "Write the final weights to DIR/model.safetensors");
  CheckpointFlags checkpoints;
  checkpoints.add_to(app);
  TrackingFlags tracking;
  tracking.add_to(app);
  CLI11_PARSE(app, argc, argv);

  try {
    AcceleratorOptions options;
    options.project_configuration = checkpoints.project();
    tracking.apply(options);
    Accelerator accelerator(options);
    accelerator.init_trackers("mlp_classifier", {{"epochs", epochs}, {"batch_size", batch_size}, {"lr", lr},
                                                 {"hidden", hidden}, {"seed", seed}});
    Generator gen(seed);
    auto [points, labels] = spirals(per_class, 0.15, gen);
    // A seeded 80/20 split: the same on every process.
    const std::vector<int64_t> order = random_permutation(points.size(0), seed, 1);
    const int64_t n_train = points.size(0) * 4 / 5;
    const Tensor train_idx = from_vector(std::vector<int64_t>(order.begin(), order.begin() + n_train));
    const Tensor test_idx = from_vector(std::vector<int64_t>(order.begin() + n_train, order.end()));
    auto train = std::make_shared<TensorDataset>(
        std::vector<Tensor>{index_select(points, 0, train_idx), index_select(labels, 0, train_idx)});
    const Tensor test_x = index_select(points, 0, test_idx), test_y = index_select(labels, 0, test_idx);

    auto model = make_mlp(hidden, gen);
    if (!init_path.empty()) model->load_state_dict(load_safetensors(init_path).tensors);
    auto optimizer = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = lr, .weight_decay = 1e-4});
    DataLoader loader(train, {.batch_size = batch_size, .shuffle = true, .seed = seed});
    auto [net, opt, data] = accelerator.prepare(model, optimizer, loader);
    checkpoints.resume(accelerator);

    // Counts batches; plain lines every 10 s when stdout is not a terminal, nothing off the main process.
    const int64_t batches = data.size();
    auto bar = accelerator.progress_bar(epochs * batches, {.description = "train"},
                                        std::min<int64_t>(data.epoch(), epochs) * batches);
    for (int64_t epoch = data.epoch(); epoch < epochs; ++epoch) {
      data.set_epoch(epoch);
      double total = 0;
      int64_t steps = 0;
      for (const Batch& batch : data) {
        auto scope = accelerator.accumulate();  // with gradient_accumulation_steps > 1, steps every k batches
        opt->zero_grad();
        Tensor loss;
        {
          auto autocast = accelerator.autocast();  // fp16/bf16 matmuls, f32 loss; nothing with mixed_precision=no
          loss = nn::cross_entropy((*net)(batch[0]), batch[1]);
        }
        accelerator.backward(loss);
        opt->step();
        total += loss.item();
        ++steps;
        bar.set("loss", loss.item());
        bar.update();
        if (!accelerator.sync_gradients()) continue;  // mid-window: no checkpoint here
        accelerator.log({{"loss", loss.item()}, {"lr", opt->lr()}});  // at completed_steps()
        if (accelerator.should_stop()) return kPreemptedExitStatus;  // a SIGTERM: saved, stop
        if (checkpoints.save_after_step(accelerator.completed_steps())) accelerator.save_state();
      }
      if (epoch % 10 == 0 || epoch == epochs - 1)
        bar.write(fmt::format("epoch {:3d}  train loss {:.4f}", epoch, total / static_cast<double>(std::max<int64_t>(steps, 1))));
      if (checkpoints.save_after_epoch()) accelerator.save_state();
    }
    bar.close();

    net->eval();
    NoGradGuard no_grad;
    auto autocast = accelerator.autocast();  // evaluated in the precision it was trained in
    const Tensor logits = (*net)(to(test_x, accelerator.device()));
    const Tensor y = to(test_y, accelerator.device());
    const double test_loss = nn::cross_entropy(logits, y).item();
    const double accuracy = mean(to(eq(argmax(logits, 1), y), DType::f32)).item();
    if (const LossScaler* scaler = accelerator.loss_scaler())
      accelerator.print(fmt::format("fp16: {}", scaler->describe()));
    accelerator.print(fmt::format("final: accuracy={:.4f} loss={:.4f} test_samples={}", accuracy, test_loss,
                                  test_x.size(0)));
    accelerator.log({{"test_accuracy", accuracy}, {"test_loss", test_loss}});
    accelerator.end_training();
    if (!save_dir.empty()) accelerator.save_model(*net, save_dir);
  } catch (const Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
