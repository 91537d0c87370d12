// Saves killed at every stage: run by checkpoint_kill.sh, one process each.
//   checkpoint_kill first DIR    train 2 steps and save DIR/checkpoints/checkpoint_0 (the previous
//                                checkpoint); print its weights' checksum
//   checkpoint_kill stages DIR   print the stages one save goes through, one per line
//   checkpoint_kill kill K DIR   load latest, train a step, and save, with SIGKILL at stage K
//   checkpoint_kill check DIR    load latest and print which checkpoint it was and its checksum
#include <fmt/format.h>
#include <signal.h>

#include <iostream>
#include <string>

#include "accel.h"
#include "runtime/checkpoint/checkpoint_dir.h"

using namespace accel;

namespace {

struct Run {
  std::unique_ptr<Accelerator> accelerator;
  std::shared_ptr<nn::Linear> model;
  std::shared_ptr<optim::AdamW> optimizer;
};

Run make_run(const std::string& dir) {
  AcceleratorOptions o;
  o.print_settings = false;
  o.project_configuration = {.project_dir = dir, .automatic_checkpoint_naming = true};
  Run r{std::make_unique<Accelerator>(o), nullptr, nullptr};
  Generator gen(3);
  r.model = std::make_shared<nn::Linear>(64, 64, true, gen);
  r.optimizer = std::make_shared<optim::AdamW>(r.model->parameters(), optim::AdamWOptions{.lr = 1e-2});
  r.accelerator->prepare(r.model, r.optimizer);
  return r;
}

void train_step(Run& r) {
  Generator gen(7);
  r.optimizer->zero_grad();
  r.accelerator->backward(nn::mse_loss((*r.model)(randn({8, 64}, gen)), zeros({8, 64})));
  r.optimizer->step();
}

double checksum(const nn::Module& model) {
  double sum = 0;
  for (const Tensor& p : model.parameters())
    for (float v : p.to_vector<float>()) sum += static_cast<double>(v);
  return sum;
}

int run(const std::string& mode, int stage, const std::string& dir) {
  Run r = make_run(dir);
  if (mode == "first") {
    train_step(r);
    train_step(r);
    r.accelerator->save_state();
    std::cout << fmt::format("{:.17g}\n", checksum(*r.model));
    return 0;
  }
  if (mode == "check") {
    const std::string loaded = r.accelerator->load_state("latest");
    std::cout << std::filesystem::path(loaded).filename().string() << " " << fmt::format("{:.17g}\n", checksum(*r.model));
    return 0;
  }
  r.accelerator->load_state("latest");
  train_step(r);
  int reached = 0;
  set_checkpoint_stage_hook([&](const std::string& name) {
    if (mode == "stages") std::cout << name << "\n";
    if (mode == "kill" && ++reached == stage) ::raise(SIGKILL);
  });
  r.accelerator->save_state();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if ((mode == "first" || mode == "stages" || mode == "check") && argc == 3) return run(mode, 0, argv[2]);
    if (mode == "kill" && argc == 4) return run(mode, std::stoi(argv[2]), argv[3]);
    std::cerr << "usage: checkpoint_kill first|stages|check DIR, or kill K DIR\n";
    return 2;
  } catch (const Error& e) {
    std::cout << "FAILED: " << e.what() << "\n";
    return 1;
  }
}
