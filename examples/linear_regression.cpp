// Linear regression, the smallest accel program: fit y = 3x + 0.5 noise with one Linear layer,
// full-batch SGD and MSE. Runs unchanged on one process or under `accel launch -n N`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <accel.h>

using namespace accel;

int main(int argc, char** argv) {
  CLI::App app{"Fit y = 3x + 0.5 noise with Linear(1, 1), MSE and full-batch SGD"};
  int epochs = 100;
  double lr = 0.1;
  uint64_t seed = 0;
  int64_t samples = 1000;
  bool print_weights = false;
  app.add_option("--epochs", epochs, "Full-batch steps")->capture_default_str();
  app.add_option("--lr", lr, "SGD learning rate")->capture_default_str();
  app.add_option("--seed", seed, "Seed of the data and the initial weights")->capture_default_str();
  app.add_option("--samples", samples, "Data set size")->capture_default_str();
  app.add_flag("--print-weights", print_weights,
               "Every process prints its final weights exactly (as hex floats), to compare the ranks");
  CLI11_PARSE(app, argc, argv);

  try {
    AcceleratorOptions options;
    options.project_configuration.logging_dir = "runs";  // where trackers write, if ACCEL_LOG_WITH asks for some
    Accelerator accelerator(options);
    accelerator.init_trackers("linear_regression", {{"epochs", epochs}, {"lr", lr}, {"samples", samples}});

    // Every rank draws the same data and initial weights from the same seed.
    Generator gen(seed);
    Tensor x = randn({samples, 1}, gen);
    Tensor y = x * 3.0 + randn({samples, 1}, gen) * 0.5;
    auto model = std::make_shared<nn::Linear>(1, 1, true, gen);
    auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = lr});
    // Full batch: the global batch is the whole data set, split between the processes.
    DataLoader loader(std::make_shared<TensorDataset>(std::vector<Tensor>{x, y}),
                      {.batch_size = samples / accelerator.num_processes()});

    auto [net, opt, data] = accelerator.prepare(model, optimizer, loader);

    for (int epoch = 0; epoch < epochs; ++epoch) {
      double epoch_loss = 0;
      for (const Batch& batch : data) {
        opt->zero_grad();
        Tensor loss = nn::mse_loss((*net)(batch[0]), batch[1]);
        accelerator.backward(loss);
        opt->step();
        epoch_loss = loss.item();
      }
      accelerator.log({{"loss", epoch_loss}, {"lr", opt->lr()}}, epoch);
      if (epoch % 10 == 0 || epoch == epochs - 1)
        accelerator.print(fmt::format("epoch {:3d}  loss {:.6f}", epoch, epoch_loss));
    }
    const double w = net->weight().item(), b = net->bias().item();
    accelerator.print(fmt::format("final: weight={:.6f} bias={:.6f}", w, b));
    accelerator.end_training();
    if (print_weights)
      std::cout << fmt::format("weights of rank {}: {:a} {:a} ({:.9g} {:.9g})\n", accelerator.process_index(),
                               static_cast<float>(w), static_cast<float>(b), w, b)
                << std::flush;
  } catch (const Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
