// A checkpoint saved on N ranks loads on M. Run under mpirun by checkpoint_reshard.sh:
//   checkpoint_reshard save DIR   train 3 steps of an epoch and save DIR/ckpt, then run on to the end
//                                 of the epoch as the uninterrupted reference (DIR/reference.txt)
//   checkpoint_reshard load DIR   load DIR/ckpt on this many ranks and train the rest of the epoch
// The global batch is the same on every world size (split_batches), so the averaged gradients are
// the same sums. load checks: the weights right after loading equal the saved ones bitwise; the rest
// of the epoch covers exactly the samples the saved run had not seen, each once; and the final
// weights are within 1e-5 of the reference. Prints PASS or FAILED: ... on rank 0 and exits 0 or 1.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "accel.h"

using namespace accel;

namespace {

constexpr int64_t kSamples = 64, kGlobalBatch = 8, kSaveAt = 3;

std::shared_ptr<nn::Sequential> make_model(uint64_t seed) {
  Generator gen(seed);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(8, 16, true, gen));
  model->push_back(std::make_shared<nn::Tanh>());
  model->push_back(std::make_shared<nn::Linear>(16, 4, true, gen));
  return model;
}

// x, y and each sample's index, so a run can tell which samples it saw.
DataLoader make_loader() {
  Generator gen(1234);
  Tensor x = randn({kSamples, 8}, gen);
  Tensor y = tanh(matmul(x, randn({8, 4}, gen)));
  Tensor index = arange(kSamples, DType::i64);
  return DataLoader(std::make_shared<TensorDataset>(std::vector<Tensor>{x, y, index}),
                    {.batch_size = kGlobalBatch, .shuffle = true, .seed = 9});
}

// The full weights through get_state_dict, so a ZeRO-3 run (ACCEL_ZERO_STAGE=3, whose parameters are
// sharded between uses) reads them too; the model has parameters only.
std::vector<double> weights_of(const Accelerator& accelerator, const nn::Module& model) {
  std::vector<double> out;
  for (const auto& [name, p] : accelerator.get_state_dict(model))
    for (float v : contiguous(p).to_vector<float>()) out.push_back(v);
  return out;
}

struct Setup {
  std::unique_ptr<Accelerator> accelerator;
  std::shared_ptr<nn::Sequential> model;
  std::shared_ptr<optim::Optimizer> optimizer;
  DataLoader data;
};

Setup setup(uint64_t seed) {
  AcceleratorOptions o;
  o.print_settings = false;
  o.split_batches = true;
  Setup s{std::make_unique<Accelerator>(o), make_model(seed), nullptr, make_loader()};
  s.optimizer = std::make_shared<optim::AdamW>(s.model->parameters(), optim::AdamWOptions{.lr = 1e-2});
  auto [net, opt, data] = s.accelerator->prepare(s.model, s.optimizer, s.data);
  s.data = data;
  return s;
}

// Trains on loader (a resumed one starts where its checkpoint stopped) to the end of the epoch, or for
// `steps` steps; returns the sample indices every rank saw, in step order.
std::vector<int64_t> train(Setup& s, const DataLoader& loader, int64_t steps) {
  std::vector<int64_t> seen;
  int64_t done = 0;
  for (const Batch& batch : loader) {
    s.optimizer->zero_grad();
    s.accelerator->backward(nn::mse_loss((*s.model)(batch[0]), batch[1]));
    s.optimizer->step();
    for (int64_t i : s.accelerator->gather(batch[2]).to_vector<int64_t>()) seen.push_back(i);
    if (++done == steps) break;
  }
  return seen;
}

void write_numbers(const std::string& path, const std::vector<double>& values) {
  std::ofstream out(path);
  out.precision(17);
  for (double v : values) out << v << "\n";
}

std::vector<double> read_numbers(const std::string& path) {
  std::ifstream in(path);
  std::vector<double> out;
  for (double v; in >> v;) out.push_back(v);
  return out;
}

int save(const std::string& dir) {
  Setup s = setup(1);
  const std::vector<int64_t> before = train(s, s.data, kSaveAt);
  s.accelerator->save_state(dir + "/ckpt");
  const std::vector<double> saved = weights_of(*s.accelerator, *s.model);  // collective under ZeRO-3
  if (s.accelerator->is_main_process()) {
    write_numbers(dir + "/saved_weights.txt", saved);
    write_numbers(dir + "/seen_before.txt", std::vector<double>(before.begin(), before.end()));
  }
  train(s, skip_first_batches(s.data, kSaveAt), -1);  // on to the end of the epoch: the run that never stopped
  const std::vector<double> reference = weights_of(*s.accelerator, *s.model);
  if (s.accelerator->is_main_process()) write_numbers(dir + "/reference.txt", reference);
  s.accelerator->wait_for_everyone();
  return 0;
}

int load(const std::string& dir) {
  Setup s = setup(99);  // other weights: the checkpoint must replace them
  s.accelerator->load_state(dir + "/ckpt");
  std::vector<std::string> problems;
  if (weights_of(*s.accelerator, *s.model) != read_numbers(dir + "/saved_weights.txt"))
    problems.push_back("the loaded weights differ from the saved ones");
  const std::vector<int64_t> after = train(s, s.data, -1);
  std::multiset<int64_t> all(after.begin(), after.end());
  for (double i : read_numbers(dir + "/seen_before.txt")) all.insert(static_cast<int64_t>(i));
  for (int64_t i = 0; i < kSamples; ++i)
    if (all.count(i) != 1) problems.push_back(fmt::format("sample {} was seen {} times in the epoch", i, all.count(i)));
  const std::vector<double> final_weights = weights_of(*s.accelerator, *s.model), reference = read_numbers(dir + "/reference.txt");
  double worst = reference.size() == final_weights.size() ? 0 : INFINITY;
  for (size_t i = 0; i < reference.size() && i < final_weights.size(); ++i)
    worst = std::max(worst, std::abs(final_weights[i] - reference[i]));
  if (!(worst <= 1e-5)) problems.push_back(fmt::format("final weights differ from the reference by {:.3g}", worst));
  if (s.accelerator->is_main_process()) {
    if (problems.empty())
      std::cout << fmt::format("PASS: loaded on {} rank(s); {} samples after the resume; max |w - reference| = {:.3g}\n",
                               s.accelerator->num_processes(), after.size(), worst);
    for (const std::string& p : problems) std::cout << "FAILED: " << p << "\n";
  }
  return problems.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 3 ? argv[1] : "";
  if (mode != "save" && mode != "load") {
    std::cerr << "usage: checkpoint_reshard save|load DIR\n";
    return 2;
  }
  try {
    return mode == "save" ? save(argv[2]) : load(argv[2]);
  } catch (const Error& e) {
    std::cout << "FAILED: " << e.what() << "\n";
    return 1;
  }
}
