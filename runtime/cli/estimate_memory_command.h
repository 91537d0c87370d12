// `accel estimate-memory --model gpt2-124M|FILE.safetensors [--strategy ...] [--mixed_precision ...]
// [--num_processes ...]`: the bytes per rank of parameters, gradients and optimizer state for each
// strategy (ddp, zero1-3), precision and process count, from runtime/strategy/memory_estimate.h.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace accel {

// GPT-2's parameter count: token and position embeddings, layers x (two LayerNorms, the attention's
// qkv and output projections, the MLP's two Linears, all with biases), the final LayerNorm; the LM
// head shares the token embedding's weight (tied), so it adds nothing. GPT-2 small (50257, 1024, 12,
// 768) has 124,439,808.
int64_t gpt2_parameter_count(int64_t vocab, int64_t context, int64_t layers, int64_t width);

// A model the command knows by name, or a safetensors file: its parameter count and a description.
struct ModelSize {
  int64_t parameters = 0;
  std::string description;
};
// "gpt2-124M", "gpt2-355M", "gpt2-774M", "gpt2-1558M", or a path to a .safetensors file (every tensor
// in its header counts). Throws accel::Error naming the known names when it is neither.
ModelSize model_size(const std::string& model);

class EstimateMemoryCommand {
 public:
  explicit EstimateMemoryCommand(CLI::App& app);
  bool selected() const { return command_ != nullptr && command_->parsed(); }
  // Prints the tables to out; returns the exit status.
  int run(std::ostream& out) const;

 private:
  CLI::App* command_ = nullptr;
  std::string model_;
  std::vector<std::string> strategies_ = {"ddp", "zero1", "zero2", "zero3"};
  std::vector<std::string> precisions_ = {"no", "bf16", "fp16"};
  std::vector<int> processes_ = {1, 2, 4, 8};
  int hybrid_shard_size_ = 0;  // HYBRID_SHARD's shard group size; 0: not given
  std::string optimizer_ = "adamw";
  bool bytes_ = false;
};

}  // namespace accel
