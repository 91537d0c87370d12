// A ZeRO checkpoint of per-rank shards, saved on 2 ranks, resumes on 1, 2 and 4. The model is
// GatedOddMlp with its branch on even steps only, so AdamW's step counts differ between parameters
// of one unit (and the spare Linear has no state at all), and the checkpoint must keep each one's. Run by zero_resume.sh
// (and by zero_hybrid_resume.sh for MODE hybrid: FSDP HYBRID_SHARD 2 x 2, saved on 4 ranks, resumed on
// 4 under it and on 2 and 1 under DDP and stage 3). MODE is a ZeRO stage 0-3 or "hybrid", optionally
// with ":bf16" or ":fp16" for that mixed_precision (ZeRO's f32 masters are then sharded, and the
// checkpoint holds those f32 slices):
//   zero_resume save MODE DIR     on 2 ranks (4 for hybrid): 3 AdamW steps of an epoch of 8 under MODE,
//                                 save_state DIR/ckpt, keep the full weights and optimizer state of
//                                 that moment (DIR/saved*.safetensors), then train on to the end of the
//                                 epoch as the run that never stopped (DIR/reference.safetensors)
//   zero_resume merged DIR        one process: DIR/merged/model.safetensors, which `accel merge-weights`
//                                 made of DIR/ckpt, equals the saved weights bitwise
//   zero_resume load MODE DIR     on this many ranks: load DIR/ckpt under MODE (one process runs
//                                 without ZeRO), check the weights and optimizer state are the saved
//                                 ones bitwise, and train the rest of the epoch
// On as many ranks as saved it, the resumed run equals the reference bitwise (losses and weights). On others it is within
// 1e-5 relative: the global batch's gradient is averaged over another number of ranks, so its float
// sums round differently (split_batches keeps the batch the same); under bf16/fp16 within 5e-3 (seen:
// 5e-4): the 16-bit grads are summed in another order, and on one rank, without ZeRO, they are f32. Prints PASS
// or FAILED: ... on rank 0 and exits 0 or 1.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "accel.h"
#include "odd_mlp.h"

using namespace accel;

namespace {

constexpr int64_t kSamples = 64, kGlobalBatch = 8, kSaveAt = 3;

// MODE without and with its ":bf16" / ":fp16".
std::string strategy_of(const std::string& mode) { return mode.substr(0, mode.find(':')); }
std::string precision_of(const std::string& mode) {
  const size_t colon = mode.find(':');
  return colon == std::string::npos ? "no" : mode.substr(colon + 1);
}

// The ranks a mode's checkpoint is saved on: 2, or 4 for HYBRID_SHARD's 2 x 2 mesh.
int64_t saved_on(const std::string& mode) { return strategy_of(mode) == "hybrid" ? 4 : 2; }

DataLoader make_loader() {
  Generator gen(4321);
  Tensor x = randn({kSamples, 7}, gen);
  Tensor y = tanh(matmul(x, randn({7, 3}, gen)));
  return DataLoader(std::make_shared<TensorDataset>(std::vector<Tensor>{x, y}),
                    {.batch_size = kGlobalBatch, .shuffle = true, .seed = 9});
}

struct Setup {
  std::unique_ptr<Accelerator> accelerator;
  std::shared_ptr<test::GatedOddMlp> model;
  std::shared_ptr<optim::Optimizer> optimizer;
  DataLoader data;
};

Setup setup(const std::string& mode, uint64_t seed) {
  AcceleratorOptions o;
  o.print_settings = false;
  o.split_batches = true;
  o.bucket_cap_mb = 256.0 / (1 << 20);  // units of at most 64 floats: several per model
  o.mixed_precision = precision_of(mode);
  if (strategy_of(mode) == "hybrid")
    o.fsdp_plugin = FSDPPlugin{.sharding_strategy = ShardingStrategy::hybrid_shard, .hybrid_shard_size = 2};
  else
    o.deepspeed_plugin =
        DeepSpeedPlugin{.zero_stage = std::stoi(strategy_of(mode)), .gradient_accumulation_steps = std::nullopt};
  Setup s{std::make_unique<Accelerator>(o), std::make_shared<test::GatedOddMlp>(seed), nullptr, make_loader()};
  s.optimizer = std::make_shared<optim::AdamW>(s.model->parameters(), optim::AdamWOptions{.lr = 1e-2});
  auto [net, opt, data] = s.accelerator->prepare(s.model, s.optimizer, s.data);
  s.data = data;
  return s;
}

// Trains on loader (a resumed one starts where its checkpoint stopped, at step `first`) to the end of
// the epoch, or for `steps` steps; returns each step's loss averaged over the ranks.
std::vector<double> train(Setup& s, const DataLoader& loader, int64_t first, int64_t steps) {
  std::vector<double> losses;
  for (const Batch& batch : loader) {
    s.model->use_branch = (first + static_cast<int64_t>(losses.size())) % 2 == 0;
    s.optimizer->zero_grad();
    Tensor loss = nn::mse_loss((*s.model)(batch[0]), batch[1]);
    s.accelerator->backward(loss);
    s.optimizer->step();
    losses.push_back(s.accelerator->reduce(loss, "mean").item());
    if (static_cast<int64_t>(losses.size()) == steps) break;
  }
  return losses;
}

// The full weights (gathered under stage 3) and the optimizer's per-parameter state in its own layout.
// Copies: under stages 1 and 2 get_state_dict gives the live parameters, which training goes on to change.
nn::StateDict weights(const Setup& s) {
  nn::StateDict out;
  for (const auto& [name, t] : s.accelerator->get_state_dict(*s.model)) out.emplace_back(name, clone(t));
  return out;
}
nn::StateDict optimizer_state(const Setup& s) {
  nn::StateDict out;
  for (const auto& [key, t] : s.accelerator->strategy().optimizer_state_dict(*s.optimizer))
    if (key.rfind("state.", 0) == 0) out.emplace_back(key, to(t, DType::f64));
  return out;
}

// "" when a and b hold the same names with the same values (bitwise with tolerance 0, else within
// tolerance relative to b's largest value), else what differs. The order of the names does not count
// (a safetensors file sorts them).
std::string compare(const char* what, const nn::StateDict& a, const nn::StateDict& b, double tolerance,
                    double* relative = nullptr) {
  std::map<std::string, std::vector<double>> x, y;
  for (const auto& [name, t] : a) x[name] = to(contiguous(t), DType::f64).to_vector<double>();
  for (const auto& [name, t] : b) y[name] = to(contiguous(t), DType::f64).to_vector<double>();
  double scale = 0, worst = 0;
  for (const auto& [name, want] : y) {
    const auto it = x.find(name);
    if (it == x.end() || it->second.size() != want.size()) return fmt::format("{}: '{}' is missing or of another size", what, name);
    for (size_t i = 0; i < want.size(); ++i) {
      scale = std::max(scale, std::abs(want[i]));
      worst = std::max(worst, std::abs(it->second[i] - want[i]));
    }
  }
  if (x.size() != y.size()) return fmt::format("{}: {} tensors against {}", what, x.size(), y.size());
  if (relative) *relative = scale > 0 ? worst / scale : worst;
  const bool same = tolerance == 0 ? x == y : worst <= tolerance * scale;
  return same ? "" : fmt::format("{}: differ by {:.3g} (relative {:.3g})", what, worst, worst / scale);
}

nn::StateDict read(const std::string& path) { return load_safetensors(path).tensors; }

int report(const Accelerator& accelerator, const std::vector<std::string>& problems, const std::string& pass) {
  if (accelerator.is_main_process()) {
    if (problems.empty()) std::cout << "PASS: " << pass << "\n";
    for (const std::string& p : problems) std::cout << "FAILED: " << p << "\n";
  }
  return problems.empty() ? 0 : 1;
}

int save(const std::string& mode, const std::string& dir) {
  Setup s = setup(mode, 1);
  if (s.accelerator->num_processes() != saved_on(mode))
    throw Error(fmt::format("zero_resume save: run it on {} ranks", saved_on(mode)));
  train(s, s.data, 0, kSaveAt);
  s.accelerator->save_state(dir + "/ckpt");
  const nn::StateDict saved = weights(s), saved_optimizer = optimizer_state(s);
  // The optimizer's parameters: body 0-5, branch 6-7, spare 8-9. The branch missed step 1 and the
  // spare every step.
  std::map<std::string, double> steps;
  for (const auto& [key, t] : saved_optimizer)
    if (t.dim() == 0) steps[key] = t.item();
  const std::map<std::string, double> want{{"state.0.step", 3}, {"state.5.step", 3}, {"state.6.step", 2},
                                           {"state.7.step", 2}};
  for (const auto& [key, count] : want)
    if (steps[key] != count)
      throw Error(fmt::format("zero_resume save: '{}' is {} after {} steps, expected {}", key, steps[key], kSaveAt, count));
  for (const auto& [key, t] : saved_optimizer)
    if (key.rfind("state.8.", 0) == 0 || key.rfind("state.9.", 0) == 0)
      throw Error(fmt::format("zero_resume save: the spare Linear, which no step used, has state '{}'", key));
  // On to the end of the epoch: the run that never stopped.
  const std::vector<double> losses = train(s, skip_first_batches(s.data, kSaveAt), kSaveAt, -1);
  const nn::StateDict reference = weights(s);
  if (s.accelerator->is_main_process()) {
    save_safetensors(dir + "/saved.safetensors", saved);
    save_safetensors(dir + "/saved_optimizer.safetensors", saved_optimizer);
    nn::StateDict with_losses = reference;
    with_losses.emplace_back("losses", from_vector(losses, {static_cast<int64_t>(losses.size())}));
    with_losses.emplace_back("saved_on", scalar_tensor(static_cast<double>(saved_on(mode)), DType::f64));
    save_safetensors(dir + "/reference.safetensors", with_losses);
  }
  s.accelerator->wait_for_everyone();
  return 0;
}

int merged(const std::string& dir) {
  // The weights are the f32 masters under every precision (bf16/fp16 save their f32 slices).
  for (const auto& [name, t] : read(dir + "/merged/model.safetensors"))
    if (t.dtype() != DType::f32) {
      std::cout << "FAILED: merge-weights' '" << name << "' is " << dtype_name(t.dtype()) << ", not the f32 master\n";
      return 1;
    }
  const std::string problem = compare("merge-weights' model.safetensors against the saved weights",
                                      read(dir + "/merged/model.safetensors"), read(dir + "/saved.safetensors"), 0);
  std::cout << (problem.empty() ? "PASS: merge-weights gives the saved weights bitwise\n" : "FAILED: " + problem + "\n");
  return problem.empty() ? 0 : 1;
}

int load(const std::string& mode, const std::string& dir) {
  Setup s = setup(mode, 99);  // other weights: the checkpoint must replace them
  s.accelerator->load_state(dir + "/ckpt");
  std::vector<std::string> problems;
  for (const std::string& p : {compare("the loaded weights", weights(s), read(dir + "/saved.safetensors"), 0),
                               compare("the loaded optimizer state", optimizer_state(s),
                                       read(dir + "/saved_optimizer.safetensors"), 0)})
    if (!p.empty()) problems.push_back(p);
  const std::vector<double> losses = train(s, s.data, kSaveAt, -1);
  nn::StateDict reference;
  std::vector<double> reference_losses;
  int64_t saved_ranks = 0;
  for (const auto& [name, t] : read(dir + "/reference.safetensors")) {
    if (name == "losses") reference_losses = t.to_vector<double>();
    else if (name == "saved_on") saved_ranks = static_cast<int64_t>(t.item());
    else reference.emplace_back(name, t);
  }
  const bool same_world = s.accelerator->num_processes() == saved_ranks;
  const double tolerance = same_world ? 0 : precision_of(mode) == "no" ? 1e-5 : 5e-3;
  double measured = 0;
  if (const std::string p =
          compare("the final weights against the uninterrupted run's", weights(s), reference, tolerance, &measured);
      !p.empty())
    problems.push_back(p);
  nn::StateDict got_losses{{"losses", from_vector(losses, {static_cast<int64_t>(losses.size())})}};
  nn::StateDict want_losses{{"losses", from_vector(reference_losses, {static_cast<int64_t>(reference_losses.size())})}};
  if (const std::string p = compare("the losses after the resume", got_losses, want_losses, tolerance); !p.empty())
    problems.push_back(p);
  return report(*s.accelerator, problems,
                fmt::format("{} ({}) on {} ranks resumed a checkpoint saved on {} ({}); {} steps after the "
                            "resume; final weights off by {:.3g} relative",
                            mode, s.accelerator->strategy().name(), s.accelerator->num_processes(), saved_ranks,
                            same_world ? "bitwise" : fmt::format("within {:g} relative", tolerance), losses.size(),
                            measured));
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 3 && args[0] == "save") return save(args[1], args[2]);
    if (args.size() == 3 && args[0] == "load") return load(args[1], args[2]);
    if (args.size() == 2 && args[0] == "merged") return merged(args[1]);
  } catch (const Error& e) {
    std::cout << "FAILED: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: zero_resume save|load MODE DIR (MODE: a ZeRO stage 0-3, or hybrid, optionally with :bf16 or :fp16), or zero_resume merged DIR\n";
  return 2;
}
