// Shared pieces of the multi-rank data-parallel tests: the world communicator, a small MLP and its
// data, a training loop run through the Accelerator and the same loop run in one process without
// one (the reference), and comparisons across ranks.
#pragma once

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "accel.h"

namespace test {

using namespace accel;

// A communicator over MPI_COMM_WORLD that main() keeps for the run, for the tests' own checks.
std::shared_ptr<Communicator>& world();

// Options for the Accelerator under test: quiet, with the given backend.
AcceleratorOptions options(const std::string& backend = "auto");

// 8 -> 32 -> 32 -> 4 with tanh, initialised from seed.
std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed);
// samples rows of x ~ N(0, 1) in 8 dims and targets y = tanh(x W) in 4 dims, the same on every rank.
std::shared_ptr<TensorDataset> regression_data(int64_t samples);
std::shared_ptr<optim::Optimizer> make_optimizer(const std::string& kind, const std::vector<Tensor>& params);

// Every parameter, flattened in order, as doubles.
std::vector<double> weights_of(const nn::Module& model);
double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b);
// "" when every rank holds exactly the same values (bitwise), else which rank differs from rank 0.
std::string differs_across_ranks(const std::vector<double>& values);
// Every rank's one number, in rank order.
std::vector<double> all_ranks(double value);

struct TrainSpec {
  std::string optimizer = "sgd";  // sgd (with momentum) or adamw
  int64_t samples = 320;
  int64_t batch_size = 32;  // global with split_batches, else per rank
  int epochs = 10;
  int accumulation_steps = 1;
  bool zero_grad_first = true;  // zero_grad at the top of the loop (else after step)
};

// The loop through the Accelerator: every rank starts from a model initialised from seed + rank
// (prepare broadcasts rank 0's), with split_batches as given. Returns this rank's final weights.
std::vector<double> train_with_accelerator(const TrainSpec& spec, const std::string& backend, bool split_batches,
                                           uint64_t seed);
// The same training in one process, without an Accelerator: batches of batch_size from the
// unsharded loader (same shuffle), accel::backward, optimizer step.
std::vector<double> train_reference(const TrainSpec& spec, uint64_t seed);

// A new directory every rank sees: rank 0 makes it and broadcasts its name.
std::string shared_temp_dir();

// The message of the accel::Error that f throws, or "no error".
std::string error_of(const std::function<void()>& f);

// Every collective any communicator of this process ran since marks was taken, as "op at site".
using LedgerMarks = std::vector<std::pair<std::shared_ptr<const CollectiveLedger>, uint64_t>>;
LedgerMarks mark_ledgers();
std::vector<std::string> collectives_since(const LedgerMarks& marks);

}  // namespace test
