// A character-level GPT trained on accel's own source code (nothing is downloaded): prints the
// training and held-out loss, the unigram entropy of the text for comparison, and a sample.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <accel.h>

#include "checkpoint_flags.h"
#include "sample_tokens.h"
#include "tracking_flags.h"

using namespace accel;

namespace {

// Every .h and .cpp file under the dirs, in sorted path order so the text is the same everywhere.
std::string read_sources(const std::vector<std::string>& dirs) {
  std::vector<std::filesystem::path> files;
  for (const std::string& dir : dirs) {
    if (!std::filesystem::is_directory(dir)) throw Error(fmt::format("char_gpt: '{}' is not a directory", dir));
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
      const auto ext = entry.path().extension();
      if (entry.is_regular_file() && (ext == ".h" || ext == ".cpp")) files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  std::string text;
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream s;
    s << in.rdbuf();
    text += s.str();
  }
  if (text.empty()) throw Error(fmt::format("char_gpt: found no .h or .cpp files under {}", fmt::join(dirs, ", ")));
  return text;
}

// Non-overlapping windows of block_size + 1 tokens: input and the next-token target.
class WindowDataset : public Dataset {
 public:
  WindowDataset(Tensor tokens, int64_t block_size) : tokens_(std::move(tokens)), block_(block_size) {}
  int64_t size() const override { return (tokens_.size(0) - 1) / block_; }
  std::vector<Tensor> get(int64_t i) const override {
    return {narrow(tokens_, 0, i * block_, block_), narrow(tokens_, 0, i * block_ + 1, block_)};
  }

 private:
  Tensor tokens_;
  int64_t block_;
};

double unigram_entropy_nats(const std::string& text) {
  std::map<char, double> counts;
  for (char c : text) counts[c] += 1;
  double h = 0;
  for (const auto& [c, n] : counts) {
    const double p = n / static_cast<double>(text.size());
    h -= p * std::log(p);
  }
  return h;
}

double mean_loss(nn::GPT& model, const Dataset& data, int64_t batch, const Accelerator& accelerator) {
  const Device device = accelerator.device();
  NoGradGuard no_grad;
  auto autocast = accelerator.autocast();  // evaluated in the precision it was trained in
  model.eval();
  double total = 0;
  int64_t batches = 0;
  for (int64_t start = 0; start + batch <= data.size(); start += batch) {
    std::vector<int64_t> idx(static_cast<size_t>(batch));
    for (int64_t i = 0; i < batch; ++i) idx[i] = start + i;
    const auto fields = data.get_batch(idx);
    total += model.loss(to(fields[0], device), to(fields[1], device)).item();
    ++batches;
  }
  model.train();
  return total / static_cast<double>(std::max<int64_t>(batches, 1));
}

std::string sample(nn::GPT& model, const std::vector<char>& vocab, int64_t length, double temperature,
                   Generator& gen, Device device) {
  model.eval();
  const int64_t newline = static_cast<int64_t>(std::find(vocab.begin(), vocab.end(), '\n') - vocab.begin());
  std::string out;
  for (int64_t id : sample_tokens(model, newline, length, temperature, gen, device)) out += vocab[id];
  model.train();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train a small character-level GPT on accel's own source files and sample from it"};
  std::vector<std::string> data_dirs;
  for (const char* layer : {"tensor", "autograd", "nn", "optim"})
    data_dirs.push_back(std::string(ACCEL_SOURCE_ROOT) + "/" + layer);
  int64_t steps = 600, batch_size = 16, sample_length = 300;
  double lr = 3e-3;
  uint64_t seed = 0;
  nn::GPTConfig config{.vocab_size = 0, .block_size = 64, .n_layer = 2, .n_head = 4, .n_embd = 64, .dropout = 0.0};
  app.add_option("--data", data_dirs, "Directories whose .h/.cpp files are the training text")->capture_default_str();
  app.add_option("--steps", steps, "Optimizer steps")->capture_default_str();
  app.add_option("--batch-size", batch_size, "Sequences per step (per process)")->capture_default_str();
  app.add_option("--lr", lr, "Peak AdamW learning rate (cosine schedule with warmup)")->capture_default_str();
  app.add_option("--seed", seed, "Seed of the weights, the shuffle and the sample")->capture_default_str();
  app.add_option("--block-size", config.block_size, "Context length")->capture_default_str();
  app.add_option("--layers", config.n_layer, "Transformer blocks")->capture_default_str();
  app.add_option("--heads", config.n_head, "Attention heads")->capture_default_str();
  app.add_option("--embd", config.n_embd, "Embedding width")->capture_default_str();
  app.add_option("--sample-length", sample_length, "Characters to sample at the end")->capture_default_str();
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
    const std::string text = read_sources(data_dirs);
    std::vector<char> vocab(text.begin(), text.end());
    std::sort(vocab.begin(), vocab.end());
    vocab.erase(std::unique(vocab.begin(), vocab.end()), vocab.end());
    std::vector<int64_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i)
      ids[i] = std::lower_bound(vocab.begin(), vocab.end(), text[i]) - vocab.begin();
    config.vocab_size = static_cast<int64_t>(vocab.size());
    accelerator.init_trackers("char_gpt", {{"steps", steps}, {"batch_size", batch_size}, {"lr", lr}, {"seed", seed},
                                           {"block_size", config.block_size}, {"n_layer", config.n_layer},
                                           {"n_head", config.n_head}, {"n_embd", config.n_embd},
                                           {"vocab_size", config.vocab_size}});

    // The last tenth of the text is held out.
    const int64_t split = static_cast<int64_t>(ids.size()) * 9 / 10;
    const Tensor tokens = from_vector(ids);
    auto train = std::make_shared<WindowDataset>(narrow(tokens, 0, 0, split), config.block_size);
    const WindowDataset held_out(narrow(tokens, 0, split, tokens.size(0) - split), config.block_size);
    const double entropy = unigram_entropy_nats(text.substr(0, static_cast<size_t>(split)));
    accelerator.print(fmt::format("text: {} characters from {}, vocabulary {}, unigram entropy {:.4f} nats/char",
                                  text.size(), fmt::join(data_dirs, ", "), vocab.size(), entropy));

    Generator gen(seed);
    auto model = std::make_shared<nn::GPT>(config, gen);
    auto optimizer = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = lr, .weight_decay = 0.1});
    optim::LRScheduler schedule = optim::LRScheduler::cosine(*optimizer, steps / 10, steps, lr / 10);
    DataLoader loader(train, {.batch_size = batch_size, .shuffle = true, .seed = seed, .drop_last = true});
    auto [net, opt, data] = accelerator.prepare(model, optimizer, loader);
    accelerator.register_for_checkpointing(schedule);
    checkpoints.resume(accelerator);

    int64_t step = accelerator.completed_steps(), epoch = data.epoch();
    double recent = 0;
    // Wall time of the training steps alone (data loading included, evaluation and sampling not).
    const auto train_start = std::chrono::steady_clock::now();
    const int64_t first_step = step;
    auto bar = accelerator.progress_bar(steps, {.description = "train"}, std::min(step, steps));
    while (step < steps) {
      data.set_epoch(epoch++);
      for (const Batch& batch : data) {
        if (step == steps) break;
        opt->zero_grad();
        Tensor loss;
        {
          auto autocast = accelerator.autocast();  // fp16/bf16 matmuls, f32 softmax/norms/loss
          loss = net->loss(batch[0], batch[1]);  // vocab-parallel under tensor parallelism
        }
        accelerator.backward(loss);
        opt->step();
        schedule.step();
        recent = recent == 0 ? loss.item() : 0.9 * recent + 0.1 * loss.item();
        ++step;
        accelerator.log({{"loss", loss.item()}, {"lr", opt->lr()}}, step);
        bar.set("loss", recent);
        bar.set("lr", opt->lr());
        bar.update();
        if (accelerator.should_stop()) return kPreemptedExitStatus;  // a SIGTERM: saved, stop
        if (checkpoints.save_after_step(step)) accelerator.save_state();
        if ((step - 1) % 50 == 0 || step == steps) {
          const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - train_start;
          bar.write(fmt::format("step {:4d}  loss {:.4f}  lr {:.2e}  {:.1f} ms/step", step - 1, recent, opt->lr(),
                                ms.count() / static_cast<double>(step - first_step)));
        }
      }
      if (checkpoints.save_after_epoch()) accelerator.save_state();
    }
    bar.close();
    const double held_out_loss = mean_loss(*net, held_out, batch_size, accelerator);
    accelerator.print(fmt::format("sample:\n{}\n", sample(*net, vocab, sample_length, 0.8, gen, accelerator.device())));
    if (const LossScaler* scaler = accelerator.loss_scaler())
      accelerator.print(fmt::format("fp16: {}", scaler->describe()));
    accelerator.print(fmt::format("final: train_loss={:.4f} held_out_loss={:.4f} unigram_entropy={:.4f}", recent,
                                  held_out_loss, entropy));
    accelerator.log({{"held_out_loss", held_out_loss}}, step);
    accelerator.end_training();
  } catch (const Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
