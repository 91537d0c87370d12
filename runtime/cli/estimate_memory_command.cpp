// EstimateMemoryCommand: the model's size, then one table per precision of the per-rank bytes.
#include "runtime/cli/estimate_memory_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>

#include "kernels/error.h"
#include "runtime/safetensors.h"
#include "runtime/strategy/memory_estimate.h"

namespace accel {

namespace {

struct Gpt2Shape {
  int64_t layers, width;
  const char* name;
};

const std::map<std::string, Gpt2Shape>& gpt2_models() {
  static const std::map<std::string, Gpt2Shape> models = {{"gpt2-124M", {12, 768, "GPT-2 small"}},
                                                         {"gpt2-355M", {24, 1024, "GPT-2 medium"}},
                                                         {"gpt2-774M", {36, 1280, "GPT-2 large"}},
                                                         {"gpt2-1558M", {48, 1600, "GPT-2 XL"}}};
  return models;
}

constexpr const char* kHybridShard = "HYBRID_SHARD";

// The ZeRO stage a strategy name means: ddp 0, zero1-3, and FSDP's names for the same (HYBRID_SHARD
// is stage 3 within a shard group, estimated apart).
int stage_of(const std::string& strategy) {
  static const std::map<std::string, int> stages = {{"ddp", 0},           {"zero1", 1},         {"zero2", 2},
                                                    {"zero3", 3},         {"NO_SHARD", 0},      {"SHARD_GRAD_OP", 2},
                                                    {"FULL_SHARD", 3}};
  const auto it = stages.find(strategy);
  if (it == stages.end())
    throw Error(fmt::format("accel estimate-memory: --strategy '{}' is not one of ddp, zero1, zero2, zero3 (or "
                            "FSDP's NO_SHARD, SHARD_GRAD_OP, FULL_SHARD, HYBRID_SHARD)",
                            strategy));
  return it->second;
}

// Optimizer state bytes per parameter, all in f32.
int optimizer_bytes(const std::string& optimizer) {
  if (optimizer == "adamw" || optimizer == "adam") return 8;  // exp_avg and exp_avg_sq
  if (optimizer == "sgd_momentum") return 4;                   // the momentum buffer
  if (optimizer == "sgd") return 0;
  throw Error(fmt::format("accel estimate-memory: --optimizer '{}' is not one of adamw, adam, sgd_momentum, sgd",
                          optimizer));
}

MixedPrecision precision_of(const std::string& name) {
  const std::optional<MixedPrecision> p = value_in(kMixedPrecisionNames, name);
  if (!p)
    throw Error(fmt::format("accel estimate-memory: --mixed_precision '{}' is not one of no, bf16, fp16, fp8", name));
  return *p;
}

std::string amount(int64_t bytes, bool exact) {
  if (exact) return std::to_string(bytes);
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
}

// 124439808 -> "124,439,808"
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

int64_t gpt2_parameter_count(int64_t vocab, int64_t context, int64_t layers, int64_t width) {
  const int64_t layer_norm = 2 * width;
  const int64_t attention = (width * 3 * width + 3 * width) + (width * width + width);
  const int64_t mlp = (width * 4 * width + 4 * width) + (4 * width * width + width);
  return vocab * width + context * width + layers * (2 * layer_norm + attention + mlp) + layer_norm;
}

ModelSize model_size(const std::string& model) {
  if (const auto it = gpt2_models().find(model); it != gpt2_models().end()) {
    const Gpt2Shape& s = it->second;
    return {gpt2_parameter_count(50257, 1024, s.layers, s.width),
            fmt::format("{} ({} layers, width {}; the LM head tied to the token embedding)", s.name, s.layers,
                        s.width)};
  }
  if (std::filesystem::is_regular_file(model)) {
    const SafetensorsHeader header = load_safetensors_header(model);
    return {header.element_count(), fmt::format("{} tensors in the safetensors file", header.tensors.size())};
  }
  throw Error(fmt::format("accel estimate-memory: --model '{}' is neither a known model (gpt2-124M, gpt2-355M, "
                          "gpt2-774M, gpt2-1558M) nor a safetensors file",
                          model));
}

EstimateMemoryCommand::EstimateMemoryCommand(CLI::App& app) {
  command_ = app.add_subcommand(
      "estimate-memory", "Bytes per rank of parameters, gradients and optimizer state, by strategy and precision");
  command_->add_option("--model", model_, "gpt2-124M, gpt2-355M, gpt2-774M, gpt2-1558M, or a .safetensors file")
      ->required();
  command_->add_option("--strategy", strategies_,
                       "ddp, zero1, zero2, zero3 (or FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD)")
      ->delimiter(',')
      ->capture_default_str();
  command_->add_option("--hybrid_shard_size", hybrid_shard_size_,
                       "HYBRID_SHARD's shard group: the ranks that shard the model (needed with HYBRID_SHARD)")
      ->check(CLI::PositiveNumber);
  command_->add_option("--mixed_precision", precisions_, "no, bf16, fp16, fp8")->delimiter(',')->capture_default_str();
  command_->add_option("-n,--num_processes", processes_, "Process counts")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command_->add_option("--optimizer", optimizer_, "adamw, adam, sgd_momentum, sgd")->capture_default_str();
  command_->add_flag("--bytes", bytes_, "Exact byte counts instead of MiB/GiB");
}

int EstimateMemoryCommand::run(std::ostream& out) const {
  const bool hybrid = std::find(strategies_.begin(), strategies_.end(), kHybridShard) != strategies_.end();
  for (const std::string& strategy : strategies_)
    if (strategy != kHybridShard) stage_of(strategy);  // a bad name fails before any table
  if (hybrid && hybrid_shard_size_ == 0)
    throw Error("accel estimate-memory: --strategy HYBRID_SHARD needs --hybrid_shard_size, the ranks of one shard "
                "group (at run time its default is the ranks of one node, which this command cannot know)");
  if (!hybrid && hybrid_shard_size_ != 0)
    throw Error(fmt::format("accel estimate-memory: --hybrid_shard_size {} is given but --strategy ({}) lists no "
                            "HYBRID_SHARD",
                            hybrid_shard_size_, fmt::join(strategies_, ",")));
  const ModelSize model = model_size(model_);
  const int state_bytes = optimizer_bytes(optimizer_);
  out << fmt::format(
      "accel estimate-memory: {}: {} parameters, {}; optimizer {} ({} bytes of f32 state per parameter)\n", model_,
      grouped(model.parameters), model.description, optimizer_, state_bytes);
  for (const std::string& precision_name : precisions_) {
    const MixedPrecision precision = precision_of(precision_name);
    out << fmt::format("\nmixed_precision {} (per rank)\n{:<14} {:>9} {:>16} {:>16} {:>16} {:>16} {:>16} {:>16}\n",
                       precision_name, "strategy", "processes", "parameters", "weight copies", "gradients",
                       "f32 masters", "optimizer", "total");
    for (const std::string& strategy : strategies_) {
      for (const int n : processes_) {
        const bool hybrid_row = strategy == kHybridShard;
        const std::string label = hybrid_row ? fmt::format("{}/{}", strategy, hybrid_shard_size_) : strategy;
        if (hybrid_row && n % hybrid_shard_size_ != 0) {
          out << fmt::format("{:<14} {:>9} (not a multiple of the shard size {})\n", label, n, hybrid_shard_size_);
          continue;
        }
        const MemoryEstimate m =
            hybrid_row ? estimate_hybrid_shard_memory(model.parameters, hybrid_shard_size_, n, precision, state_bytes)
                       : estimate_memory(model.parameters, stage_of(strategy), n, precision, state_bytes);
        out << fmt::format("{:<14} {:>9} {:>16} {:>16} {:>16} {:>16} {:>16} {:>16}\n", label, n,
                           amount(m.parameters, bytes_), amount(m.weight_copies, bytes_),
                           amount(m.gradients, bytes_), amount(m.master_weights, bytes_),
                           amount(m.optimizer_state, bytes_), amount(m.total(), bytes_));
      }
    }
  }
  out << "\nWhat accel holds: in f32, f32 parameters, gradients and optimizer state. Under bf16 and fp16, DDP keeps "
         "f32 masters as its parameters and f32 gradients, plus a 16-bit copy of every parameter for the matmuls "
         "(2 bytes each, whole on every rank); ZeRO stages 1-3 hold ZeRO's mixed-precision formulas instead: 16-bit "
         "parameters and gradients (sharded as the stage shards them) and the f32 masters only as each rank's "
         "slice (2 + 2 + 12 bytes per parameter with Adam: 2Ψ + 2Ψ + 12Ψ/N at stage 1, 2Ψ + 14Ψ/N at 2, 16Ψ/N "
         "at 3). fp8 keeps f32 masters at every stage and counts the 16-bit copies as an upper bound (the "
         "Linears it runs in FP8 quantise their weights in each forward and keep no copy; its amax histories, "
         "12 KiB per Linear, are not counted). Not counted: activations, buffers, communication buckets, the f32 "
         "grad of a master slice between the backward that syncs and the step, and each unit's padding to a "
         "multiple of the process count. HYBRID_SHARD/S shards as FULL_SHARD within groups of S ranks and "
         "replicates across the groups: a rank holds FULL_SHARD's bytes at S processes. With grad_comm_dtype "
         "f32 under bf16/fp16, ZeRO's shard gradients are f32: 4 bytes per sharded parameter instead of 2 "
         "(stages 2, 3 and HYBRID_SHARD).\n";
  return 0;
}

}  // namespace accel
