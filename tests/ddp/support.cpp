// The world communicator, models, data, training loops and cross-rank comparisons of the tests.
#include "support.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

namespace test {

std::shared_ptr<Communicator>& world() {
  static std::shared_ptr<Communicator> comm;  // set by main() for the length of the run
  return comm;
}

AcceleratorOptions options(const std::string& backend) {
  AcceleratorOptions o;
  o.print_settings = false;
  o.backend = backend;
  return o;
}

std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed) {
  Generator gen(seed);
  auto mlp = std::make_shared<nn::Sequential>();
  mlp->push_back(std::make_shared<nn::Linear>(8, 32, true, gen));
  mlp->push_back(std::make_shared<nn::Tanh>());
  mlp->push_back(std::make_shared<nn::Linear>(32, 32, true, gen));
  mlp->push_back(std::make_shared<nn::Tanh>());
  mlp->push_back(std::make_shared<nn::Linear>(32, 4, true, gen));
  return mlp;
}

std::shared_ptr<TensorDataset> regression_data(int64_t samples) {
  Generator gen(1234);
  Tensor x = randn({samples, 8}, gen);
  Tensor w = randn({8, 4}, gen);
  return std::make_shared<TensorDataset>(std::vector<Tensor>{x, tanh(matmul(x, w))});
}

std::shared_ptr<optim::Optimizer> make_optimizer(const std::string& kind, const std::vector<Tensor>& params) {
  if (kind == "sgd") return std::make_shared<optim::SGD>(params, optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  if (kind == "adamw")
    return std::make_shared<optim::AdamW>(params, optim::AdamWOptions{.lr = 3e-3, .weight_decay = 0.01});
  if (kind == "adamw_groups") {  // GPT-2's split: 2-D weights decayed; biases undecayed, at twice the lr
    optim::ParamGroup decayed{{}, {{"weight_decay", 0.1}}}, other{{}, {{"weight_decay", 0.0}, {"lr", 6e-3}, {"beta2", 0.95}}};
    for (const Tensor& p : params) (p.dim() >= 2 ? decayed : other).params.push_back(p);
    return std::make_shared<optim::AdamW>(std::vector<optim::ParamGroup>{decayed, other},
                                          optim::AdamWOptions{.lr = 3e-3});
  }
  throw Error("make_optimizer: unknown kind " + kind);
}

std::vector<double> weights_of(const nn::Module& model) {
  std::vector<double> out;
  for (const Tensor& p : model.parameters())
    for (float v : p.to_vector<float>()) out.push_back(v);
  return out;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

std::string differs_across_ranks(const std::vector<double>& values) {
  Communicator& comm = *world();
  const int64_t n = static_cast<int64_t>(values.size());
  Tensor all = empty({comm.size() * n}, DType::f64);
  comm.all_gather(from_vector(values), all);
  const double* p = all.data<double>();
  for (int r = 1; r < comm.size(); ++r)
    if (std::memcmp(p, p + r * n, static_cast<size_t>(n) * sizeof(double)) != 0)
      return fmt::format("rank {}'s values differ from rank 0's", r);
  return "";
}

std::vector<double> all_ranks(double value) {
  Communicator& comm = *world();
  Tensor all = empty({comm.size()}, DType::f64);
  comm.all_gather(scalar_tensor(value, DType::f64), all);
  return all.to_vector<double>();
}

std::vector<double> train_with_accelerator(const TrainSpec& spec, const std::string& backend, bool split_batches,
                                           uint64_t seed) {
  AcceleratorOptions o = options(backend);
  o.split_batches = split_batches;
  o.gradient_accumulation_steps = spec.accumulation_steps;
  Accelerator accelerator(o);
  auto model = make_mlp(seed + static_cast<uint64_t>(accelerator.process_index()));
  auto optimizer = make_optimizer(spec.optimizer, model->parameters());
  DataLoader loader(regression_data(spec.samples), {.batch_size = spec.batch_size, .shuffle = true, .seed = 7});
  auto [net, opt, data] = accelerator.prepare(model, optimizer, loader);
  for (int epoch = 0; epoch < spec.epochs; ++epoch) {
    data.set_epoch(epoch);
    for (const Batch& batch : data) {
      auto scope = accelerator.accumulate();
      if (spec.zero_grad_first) opt->zero_grad();
      accelerator.backward(nn::mse_loss((*net)(batch[0]), batch[1]));
      opt->step();
      if (!spec.zero_grad_first) opt->zero_grad();
    }
  }
  return weights_of(*net);
}

std::vector<double> train_reference(const TrainSpec& spec, uint64_t seed) {
  auto model = make_mlp(seed);
  auto opt = make_optimizer(spec.optimizer, model->parameters());
  DataLoader data(regression_data(spec.samples), {.batch_size = spec.batch_size, .shuffle = true, .seed = 7});
  for (int epoch = 0; epoch < spec.epochs; ++epoch) {
    data.set_epoch(epoch);
    for (const Batch& batch : data) {
      opt->zero_grad();
      backward(nn::mse_loss((*model)(batch[0]), batch[1]));
      opt->step();
    }
  }
  return weights_of(*model);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

LedgerMarks mark_ledgers() {
  LedgerMarks marks;
  for (const auto& ledger : live_ledgers()) marks.emplace_back(ledger, ledger->last_seq());
  return marks;
}

std::vector<std::string> collectives_since(const LedgerMarks& marks) {
  std::vector<std::string> out;
  for (const auto& ledger : live_ledgers()) {
    uint64_t from = 0;
    for (const auto& [known, seq] : marks)
      if (known == ledger) from = seq;
    for (const LedgerEntry& e : ledger->entries())
      if (e.seq > from) out.push_back(e.op + " at " + e.site);
  }
  return out;
}

// A directory every rank sees: rank 0 makes it and broadcasts its name.
std::string shared_temp_dir() {
  std::vector<int64_t> bytes(256, 0);
  if (world()->rank() == 0) {
    std::string pattern = (std::filesystem::temp_directory_path() / "accel_ckpt_XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    for (size_t i = 0; i < pattern.size() && i < bytes.size(); ++i) bytes[i] = pattern[i];
  }
  Tensor t = from_vector(bytes);
  world()->broadcast(t, 0);
  std::string out;
  for (int64_t c : t.to_vector<int64_t>())
    if (c != 0) out.push_back(static_cast<char>(c));
  return out;
}

}  // namespace test
