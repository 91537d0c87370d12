// checkpoint_save: what a checkpoint of a GPT-2-124M-sized model costs. Side by side in one run:
// the training pause of a synchronous save_state against an async one, the save and load throughput,
// and the disk's own write speed (the same bytes written and fsync'ed by plain write(2)). Medians
// of --repeats. Prints a table; --json FILE writes the numbers.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "accel.h"
#include "bench/timing.h"

using namespace accel;
namespace fs = std::filesystem;

namespace {

using timing::Clock;
using timing::median;
using timing::seconds_since;

int64_t directory_bytes(const fs::path& dir) {
  int64_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) bytes += static_cast<int64_t>(e.file_size());
  return bytes;
}

// The disk alone: bytes written in 64 MiB blocks with write(2), then fsync.
double disk_write_seconds(const fs::path& file, int64_t bytes) {
  std::vector<char> block(size_t{64} << 20, 1);
  const auto start = Clock::now();
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw Error(fmt::format("checkpoint_save: cannot open {}", file.string()));
  for (int64_t left = bytes; left > 0;) {
    const auto n = static_cast<size_t>(std::min<int64_t>(left, static_cast<int64_t>(block.size())));
    if (::write(fd, block.data(), n) != static_cast<ssize_t>(n)) throw Error("checkpoint_save: write failed");
    left -= static_cast<int64_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  const double s = seconds_since(start);
  fs::remove(file);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"save_state / load_state of a GPT-2-124M-sized model: sync vs async pause, GB/s, disk speed"};
  std::string dir = (fs::temp_directory_path() / "accel_checkpoint_bench").string(), json_path;
  int repeats = 3;
  app.add_option("--dir", dir, "Where the checkpoints go (removed afterwards)")->capture_default_str();
  app.add_option("--repeats", repeats, "Repeats of each measurement")->capture_default_str();
  app.add_option("--json", json_path, "Also write the numbers here");
  CLI11_PARSE(app, argc, argv);
  try {
    AcceleratorOptions o;
    o.print_settings = false;
    Accelerator accelerator(o);
    Generator gen(0);
    // GPT-2 small's shape: 12 layers, 12 heads, 768 wide, 1024 positions, the 50257-token vocabulary.
    auto model = std::make_shared<nn::GPT>(
        nn::GPTConfig{.vocab_size = 50257, .block_size = 1024, .n_layer = 12, .n_head = 12, .n_embd = 768}, gen);
    auto optimizer = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 1e-4});
    auto [net, opt] = accelerator.prepare(model, optimizer);
    int64_t params = 0;
    for (const Tensor& p : net->parameters()) params += p.numel();
    // One step, so the checkpoint carries AdamW's two moments as a run's would.
    const Tensor idx = from_vector<int64_t>(std::vector<int64_t>(8, 1), {1, 8});
    accelerator.backward(nn::cross_entropy(net->forward(idx), from_vector<int64_t>(std::vector<int64_t>(8, 2), {1, 8})));
    opt->step();

    std::vector<double> sync_pause, async_pause, async_total, load_s, disk_s;
    int64_t bytes = 0;
    for (int r = 0; r < repeats; ++r) {
      fs::remove_all(dir);
      auto start = Clock::now();
      accelerator.save_state(dir + "/sync");
      sync_pause.push_back(seconds_since(start));
      bytes = directory_bytes(dir + "/sync");
      start = Clock::now();
      accelerator.save_state(dir + "/async", {.async = true});
      async_pause.push_back(seconds_since(start));
      accelerator.wait_for_save();
      async_total.push_back(seconds_since(start));
      start = Clock::now();
      accelerator.load_state(dir + "/sync");
      load_s.push_back(seconds_since(start));
      disk_s.push_back(disk_write_seconds(fs::path(dir) / "disk_probe.bin", bytes));
    }
    fs::remove_all(dir);
    const double gb = static_cast<double>(bytes) / 1e9;
    fmt::print("checkpoint of GPT-2-124M-sized nn::GPT ({:.1f} M parameters, untied lm head) with AdamW state: "
               "{:.2f} GB; medians of {}\n\n",
               static_cast<double>(params) / 1e6, gb, repeats);
    fmt::print("{:<44} {:>10} {:>10}\n", "measurement", "seconds", "GB/s");
    auto row = [&](const char* name, double s) { fmt::print("{:<44} {:>10.3f} {:>10.2f}\n", name, s, gb / s); };
    row("save_state (sync): training pause", median(sync_pause));
    row("save_state (async): training pause", median(async_pause));
    row("save_state (async): until written", median(async_total));
    row("load_state", median(load_s));
    row("disk alone: write(2) + fsync, same bytes", median(disk_s));
    if (!json_path.empty()) {
      std::ofstream(json_path) << nlohmann::json{{"bytes", bytes},
                                                 {"parameters", params},
                                                 {"sync_pause_s", median(sync_pause)},
                                                 {"async_pause_s", median(async_pause)},
                                                 {"async_total_s", median(async_total)},
                                                 {"load_s", median(load_s)},
                                                 {"disk_write_s", median(disk_s)}}
                                      .dump(2);
    }
  } catch (const Error& e) {
    fmt::print(stderr, "checkpoint_save: {}\n", e.what());
    return 1;
  }
  return 0;
}
