// examples/train_gpt2 as a user runs it, on files the test writes: GPT-2 124M (--model d12) trains on a
// small shard with its loss falling, and `accel launch -n 2` prints the same losses as one process with
// the same global batch (within 1e-5 relative over 10 steps); a small llm.c model file and the same
// weights as safetensors start the same run; ZeRO 1-3 match plain data parallel; validation, samples
// through a tokenizer, the saved model, a resumed checkpoint, --shuffle and the flags' errors.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "../temp_dir.h"
#include "accel.h"

using namespace accel;
namespace fs = std::filesystem;
using test::TempDir;

#include "run_command.h"

namespace {

using test_support::Run;
using test_support::run;

// No config file or ACCEL_* variable of the user's may change the run; each run is bounded.
const std::string kEnv =
    "env ACCEL_CONFIG_FILE=/nonexistent ACCEL_ZERO_STAGE= ACCEL_MIXED_PRECISION= ACCEL_GRADIENT_ACCUMULATION_STEPS= "
    "OMP_NUM_THREADS=1 timeout 300";

std::string trainer() { return fmt::format("{} {}/train_gpt2", kEnv, ACCEL_EXAMPLES_DIR); }
std::string launch(int n, const std::string& extra = "") {
  return fmt::format("{} {} launch -n {} {} {}/train_gpt2", kEnv, ACCEL_CLI, n, extra, ACCEL_EXAMPLES_DIR);
}

// A text with structure a model learns within a few steps: a cycle of `period` ids below `vocab`,
// with every eighth id random.
std::vector<uint16_t> patterned_tokens(size_t n, int vocab, int period, uint64_t seed) {
  Generator gen(seed);
  const std::vector<float> u = rand({static_cast<int64_t>(n)}, gen).to_vector<float>();
  std::vector<uint16_t> tokens(n);
  for (size_t i = 0; i < n; ++i)
    tokens[i] = static_cast<uint16_t>(i % 8 == 7 ? static_cast<int>(u[i] * static_cast<float>(vocab)) % vocab
                                                 : static_cast<int>((i % static_cast<size_t>(period)) * 13 % vocab));
  return tokens;
}

// Every "step N/M: train loss X" line's loss, checking that the steps come once each, in order from first.
std::vector<double> step_losses(const std::string& output, int first = 1) {
  static const std::regex line(R"(^step (\d+)/(\d+): train loss (\S+) lr (\S+) .* ms (\S+) tok/s .*% of matmul$)");
  std::vector<double> losses;
  std::istringstream lines(output);
  for (std::string l; std::getline(lines, l);) {
    std::smatch m;
    if (!std::regex_match(l, m, line)) continue;
    CHECK(std::stoi(m[1]) == static_cast<int>(losses.size()) + first);
    losses.push_back(std::stod(m[3]));
  }
  return losses;
}

double worst_relative(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / std::abs(b[i]));
  return worst;
}

// A 2-layer GPT-2 of 128 channels in heads of 64 (GPT-2's head size, which a safetensors file without
// config.json implies), vocab 96 padded to 128: written as an llm.c file and as safetensors.
nn::GPTConfig small_config() {
  return {.vocab_size = 96, .block_size = 32, .n_layer = 2, .n_head = 2, .n_embd = 128, .dropout = 0.0,
          .tie_weights = true, .padded_vocab_size = 128};
}

}  // namespace

TEST_CASE("train_gpt2 --model d12: the loss falls, and 2 ranks under accel launch print 1 rank's losses") {
  const TempDir dir("train_gpt2");
  llmc::write_token_shard(dir.file("train.bin"), patterned_tokens(4096, 512, 37, 1));
  // 64 tokens a step: one process accumulates two micro-batches of 2 x 16, each of 2 ranks takes one.
  const std::string flags = fmt::format("--model d12 --train_data {} --batch_size 2 --seq_len 16 --total_batch_size 64 "
                                        "--steps 10 --lr 1e-3",
                                        dir.file("train.bin"));
  const Run one = run(trainer() + " " + flags);
  INFO(one.output);
  REQUIRE(one.status == 0);
  CHECK(one.output.find("768 channels, vocab 50257 (padded 50304), 124475904 parameters") != std::string::npos);
  const std::vector<double> single = step_losses(one.output);
  REQUIRE(single.size() == 10);
  CHECK(single[0] > 10.0);  // ln(50257) = 10.8 from GPT-2's init
  CHECK(single[9] < single[0] - 2.0);
  const Run two = run(launch(2) + " " + flags);
  INFO(two.output);
  REQUIRE(two.status == 0);
  CHECK(two.output.find("B 2 x T 16 x 2 rank(s) x 1 micro-batch(es) = 64 tokens a step") != std::string::npos);
  const std::vector<double> ranks = step_losses(two.output);  // the main process alone prints
  CHECK(worst_relative(ranks, single) <= 1e-5);
}

TEST_CASE("train_gpt2 starts alike from an llm.c file and from safetensors; ZeRO 1-3 and TP=2 match one process") {
  const TempDir dir("train_gpt2");
  Generator gen(3);
  nn::GPT model(small_config(), gen);
  llmc::save_llmc_gpt2(model, dir.file("weights_a"));  // no extension: the trainer reads the content
  save_hf_gpt2(model, dir.file("weights_b"));
  // 16 x 128 + 1 tokens a shard: one rank's micro-batches of 64 tokens and two ranks' of 128 use the
  // same tokens of each shard (llm.c's loader leaves a shard's tail shorter than a step unread).
  llmc::write_token_shard(dir.file("train_000.bin"), patterned_tokens(2049, 96, 11, 4));
  llmc::write_token_shard(dir.file("train_001.bin"), patterned_tokens(2049, 96, 11, 5));
  const std::string flags = fmt::format("--train_data '{}' --batch_size 2 --seq_len 32 --total_batch_size 256 --steps 10 "
                                        "--lr 1e-3 --warmup_steps 2 --weight_decay 0.1",
                                        dir.file("train_*.bin"));
  const Run llmc_file = run(trainer() + " --init_from " + dir.file("weights_a") + " " + flags);
  INFO(llmc_file.output);
  REQUIRE(llmc_file.status == 0);
  CHECK(llmc_file.output.find("x 4 micro-batch(es) = 256 tokens a step; 2 train shard(s)") != std::string::npos);
  const std::vector<double> reference = step_losses(llmc_file.output);
  REQUIRE(reference.size() == 10);
  CHECK(reference[9] < reference[0] - 0.5);
  // The same weights; transformers' file has no padded rows, so only the rounding of the head may differ.
  const Run safetensors = run(trainer() + " --init_from " + dir.file("weights_b") + " " + flags);
  INFO(safetensors.output);
  CHECK(safetensors.output.find("vocab 96 (padded 96)") != std::string::npos);
  CHECK(worst_relative(step_losses(safetensors.output), reference) <= 1e-6);
  for (const std::string strategy : {"", "--use_deepspeed --zero_stage 1", "--use_deepspeed --zero_stage 2",
                                     "--use_deepspeed --zero_stage 3", "--tp_size 2"}) {
    const Run ranks = run(launch(2, strategy) + " --init_from " + dir.file("weights_a") + " " + flags);
    INFO(strategy, "\n", ranks.output);
    REQUIRE(ranks.status == 0);
    CHECK(worst_relative(step_losses(ranks.output), reference) <= 1e-5);
  }
}

TEST_CASE("train_gpt2: validation, samples through a tokenizer, the saved model, a resume, --shuffle, refused flags") {
  const TempDir dir("train_gpt2");
  Generator gen(3);
  nn::GPT model(small_config(), gen);
  llmc::save_llmc_gpt2(model, dir.file("init.bin"));
  llmc::write_token_shard(dir.file("train.bin"), patterned_tokens(4096, 96, 11, 4));
  llmc::write_token_shard(dir.file("val.bin"), patterned_tokens(1024, 96, 11, 6));
  llmc::Gpt2Tokenizer tokenizer{.version = 2, .pieces = {}, .eot_token = 0};
  for (int i = 0; i < 96; ++i) tokenizer.pieces.push_back(fmt::format("<{}>", i));
  llmc::write_gpt2_tokenizer(dir.file("tokenizer.bin"), tokenizer);
  const std::string base = fmt::format("{} --init_from {} --train_data {} --batch_size 4 --seq_len 32 --lr 1e-3", trainer(),
                                       dir.file("init.bin"), dir.file("train.bin"));
  const std::string out = dir.file("out");
  const Run r = run(base + fmt::format(" --steps 6 --val_data {} --val_every 3 --val_steps 4 --sample_every 6 "
                                       "--sample_tokens 5 --tokenizer {} --output_dir {}",
                                       dir.file("val.bin"), dir.file("tokenizer.bin"), out));
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::regex val(R"(val loss (\d+\.\d{6}) at step (3|6))");
  const auto vals = std::distance(std::sregex_iterator(r.output.begin(), r.output.end(), val), std::sregex_iterator());
  CHECK(vals == 2);
  CHECK(std::regex_search(r.output, std::regex(R"(sample at step 6: (<\d+>){5}\n)")));
  REQUIRE(fs::exists(fs::path(out) / "model.bin"));
  REQUIRE(fs::exists(fs::path(out) / "model.safetensors"));
  // The saved model is the trained one: from it, the first loss is below the start's.
  const std::vector<double> first = step_losses(r.output);
  const Run again = run(fmt::format("{} --init_from {} --train_data {} --batch_size 4 --seq_len 32 --steps 1", trainer(),
                                    (fs::path(out) / "model.safetensors").string(), dir.file("train.bin")));
  REQUIRE(again.status == 0);
  CHECK(step_losses(again.output)[0] < first[0] - 0.3);

  // Checkpoints every 3 steps; a run resumed from the one at step 3 continues as the whole run did.
  const std::string checkpointed = dir.file("checkpointed");
  const Run whole = run(base + " --steps 6 --lr_schedule constant");
  const Run part = run(base + " --steps 3 --lr_schedule constant --checkpointing_steps 3 --output_dir " + checkpointed);
  REQUIRE(part.status == 0);
  const Run resumed = run(base + " --steps 6 --lr_schedule constant --resume_from_checkpoint latest --output_dir " +
                          checkpointed);
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  CHECK(resumed.output.find("at step 3") != std::string::npos);
  const std::vector<double> all = step_losses(whole.output);
  REQUIRE(all.size() == 6);
  CHECK(step_losses(resumed.output, 4) == std::vector<double>(all.begin() + 3, all.end()));

  const Run shuffled = run(base + " --steps 3 --shuffle");
  REQUIRE(shuffled.status == 0);
  CHECK(step_losses(shuffled.output)[1] != first[1]);  // other batches

  const Run uneven = run(base + " --total_batch_size 100");
  CHECK(uneven.status != 0);
  CHECK(uneven.output.find("--total_batch_size 100 is not a multiple of B 4 x T 32 x 1 data-parallel rank(s) = 128 "
                           "tokens") != std::string::npos);
  const Run both = run(base + " --model d24");
  CHECK(both.status != 0);
  CHECK(both.output.find("--init_from excludes --model") != std::string::npos);
  const Run long_context = run(fmt::format("{} --init_from {} --train_data {} --seq_len 64", trainer(),
                                           dir.file("init.bin"), dir.file("train.bin")));
  CHECK(long_context.status != 0);
  CHECK(long_context.output.find("--seq_len 64 exceeds the model's context of 32 tokens") != std::string::npos);
  const Run help = run(trainer() + " --help");
  CHECK(help.status == 0);
  for (const char* flag : {"--init_from", "--model", "--train_data", "--val_data", "--total_batch_size", "--lr_schedule",
                           "--grad_clip", "--sample_every", "--tokenizer", "--output_dir", "--shuffle", "--seed"})
    CHECK_MESSAGE(help.output.find(flag) != std::string::npos, flag);
}
