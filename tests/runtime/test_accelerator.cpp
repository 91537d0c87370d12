// The Accelerator in one process: settings precedence for backend and bucket_cap_mb, collectives
// that are the identity, gradient accumulation through the optimizer's step hook, and the
// deterministic option. Multi-rank behaviour is tested under mpirun in tests/ddp/.
#include <doctest/doctest.h>

#include <omp.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "accel.h"
#include "collective/timeline.h"
#include "tensor/deterministic.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"

using namespace accel;

namespace {

// A config file that sets the backend, so precedence can be seen; removed at the end of the test. Named
// per process: two checkouts running the suite at once would otherwise remove each other's file.
struct TempConfig {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("accel_test_accelerator_" + std::to_string(getpid()) + ".yaml");
  explicit TempConfig(const std::string& text) { std::ofstream(path) << text; }
  ~TempConfig() { std::filesystem::remove(path); }
};

AcceleratorOptions quiet(const TempConfig& config) {
  AcceleratorOptions o;
  o.print_settings = false;
  o.config_file = config.path.string();
  return o;
}

}  // namespace

TEST_CASE("backend and bucket_cap_mb: code, then environment, then config file, then default") {
  const TempConfig config("backend: ring\n");
  AcceleratorOptions o = quiet(config);
  EffectiveSettings s = resolve_settings(o, {});
  CHECK(s.backend.value == Backend::ring);
  CHECK(s.backend.source == "config file");
  CHECK(s.bucket_cap_mb.value == 25.0);
  CHECK(s.bucket_cap_mb.source == "default");
  s = resolve_settings(o, {{"ACCEL_BACKEND", "mpi"}, {"ACCEL_BUCKET_CAP_MB", "4.5"}});
  CHECK(s.backend.value == Backend::mpi);
  CHECK(s.backend.source == "environment ACCEL_BACKEND");
  CHECK(s.bucket_cap_mb.value == 4.5);
  o.backend = "auto";
  o.bucket_cap_mb = 2;
  s = resolve_settings(o, {{"ACCEL_BACKEND", "mpi"}, {"ACCEL_BUCKET_CAP_MB", "4.5"}});
  CHECK(s.backend.value == Backend::automatic);
  CHECK(s.backend.source == "code");
  CHECK(s.bucket_cap_mb.value == 2.0);
  CHECK_THROWS_WITH_AS(resolve_settings(quiet(config), {{"ACCEL_BACKEND", "gloo"}}),
                       "Accelerator: backend 'gloo' from environment ACCEL_BACKEND is not valid; expected auto, mpi, "
                       "ring or nccl",
                       Error);
  CHECK_THROWS_WITH_AS(resolve_settings(quiet(config), {{"ACCEL_BUCKET_CAP_MB", "0"}}),
                       "Accelerator: bucket_cap_mb '0' from environment ACCEL_BUCKET_CAP_MB is not valid; expected a "
                       "number of MiB > 0",
                       Error);
}

TEST_CASE("one process: no communicator, and every collective is the identity") {
  const TempConfig config("backend: ring\n");
  Accelerator accelerator(quiet(config));
  CHECK(accelerator.num_processes() == 1);
  CHECK(accelerator.communicator() == nullptr);
  CHECK(accelerator.backend() == "none");
  const Tensor t = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  CHECK(accelerator.gather(t).to_vector<float>() == t.to_vector<float>());
  CHECK(accelerator.gather_for_metrics(t).shape() == Shape{2, 2});
  CHECK(accelerator.reduce(t, "mean").to_vector<float>() == t.to_vector<float>());
  CHECK(accelerator.broadcast(t, 0).to_vector<float>() == t.to_vector<float>());
  CHECK(accelerator.pad_across_processes(t, 1).shape() == Shape{2, 2});
  CHECK(accelerator.gather(scalar_tensor(5.0)).shape() == Shape{1});
  accelerator.wait_for_everyone();
  { auto scope = accelerator.main_process_first(); }
  CHECK_THROWS_WITH_AS(accelerator.broadcast(t, 1), "Accelerator::broadcast: from = 1 is not a rank of 1", Error);
}

TEST_CASE("memory_stats: the host's allocator, whose peak sees a training step's temporaries") {
  const TempConfig config("backend: ring\n");
  Accelerator accelerator(quiet(config));
  Generator gen(3);
  auto model = std::make_shared<nn::Linear>(256, 256, true, gen);
  auto sgd = std::make_shared<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.1});
  auto [net, opt] = accelerator.prepare(model, sgd);
  const Tensor x = randn({512, 256}, gen);
  accelerator.reset_peak_memory_stats();
  const std::vector<Accelerator::DeviceMemory> before = accelerator.memory_stats();
  REQUIRE(before.size() == 1);  // a CPU run: the host only
  CHECK(before[0].device == Device::cpu());
  CHECK(before[0].stats.peak_allocated_bytes == before[0].stats.allocated_bytes);
  opt->zero_grad();
  accelerator.backward(nn::mse_loss((*net)(x), x));
  opt->step();
  const MemoryStats after = accelerator.memory_stats()[0].stats;
  // The [512, 256] output (512 KiB) and its grad lived during the step; the weight's grad (256 KiB) stays.
  CHECK(after.peak_allocated_bytes >= before[0].stats.allocated_bytes + (512 << 10) + (256 << 10));
  CHECK(after.allocated_bytes >= before[0].stats.allocated_bytes + (256 << 10));
  CHECK(after.peak_allocated_bytes >= after.allocated_bytes);
}

TEST_CASE("one process: accumulate() divides the loss by the window and gates the optimizer") {
  const TempConfig config("gradient_accumulation_steps: 2\n");
  Accelerator accelerator(quiet(config));
  REQUIRE(accelerator.gradient_accumulation_steps() == 2);
  Generator gen(0);
  auto w = std::make_shared<nn::Linear>(1, 1, false, gen);
  auto sgd = std::make_shared<optim::SGD>(w->parameters(), optim::SGDOptions{.lr = 1.0});
  // Three samples x = 1, 2, 3 in batches of one: windows of 2 and 1 (the last one short).
  const Tensor x = from_vector(std::vector<float>{1, 2, 3}, {3, 1});
  DataLoader loader(std::make_shared<TensorDataset>(std::vector<Tensor>{x}), {.batch_size = 1});
  auto [net, opt, data] = accelerator.prepare(w, sgd, loader);
  const double w0 = net->weight().item();
  std::vector<double> weights, grads;
  for (const Batch& batch : data) {
    auto scope = accelerator.accumulate();
    opt->zero_grad();
    // loss = w x, so the grad is x divided by the window's size.
    accelerator.backward(sum((*net)(batch[0])));
    grads.push_back(net->weight().grad().item());
    opt->step();
    weights.push_back(net->weight().item());
  }
  // Window 1: grads 1/2, then 1/2 + 2/2 (kept, not zeroed); step by 1.5. Window 2: 3/1.
  CHECK(grads == std::vector<double>{0.5, 1.5, 3.0});
  CHECK(weights[0] == w0);
  CHECK(weights[1] == doctest::Approx(w0 - 1.5));
  CHECK(weights[2] == doctest::Approx(w0 - 4.5));
  // Outside accumulate(): a plain backward, no division, and the optimizer steps.
  opt->zero_grad();
  accelerator.backward(sum((*net)(from_vector(std::vector<float>{2}, {1, 1}))));
  CHECK(net->weight().grad().item() == 2.0);
}

TEST_CASE("backend nccl needs NCCL in the build and a GPU for this process") {
  const TempConfig config("backend: mpi\n");
  AcceleratorOptions o = quiet(config);
  o.backend = "nccl";
#if !ACCEL_WITH_NCCL
  CHECK_THROWS_WITH_AS(Accelerator{o},
                       "Accelerator: backend nccl (from code) is not available: this build has no NCCL; use auto, mpi "
                       "or ring",
                       Error);
#else
  o.cpu = true;  // whatever GPUs there are, this process must not use them
  CHECK_THROWS_WITH_AS(Accelerator{o},
                       "Accelerator: backend nccl (from code) needs a GPU, but the device is cpu (cpu=true); use auto, "
                       "mpi or ring",
                       Error);
  if (cuda_device_count() == 0) {
    o.cpu = false;
    CHECK_THROWS_WITH_AS(Accelerator{o},
                         "Accelerator: backend nccl (from code) needs a GPU, but the device is cpu (no CUDA device is "
                         "visible); use auto, mpi or ring",
                         Error);
  }
#endif
}

namespace {

// The bytes of the loss and of every weight after one prepared AdamW step of a small GPT, on
// `threads` OpenMP threads.
std::vector<std::vector<unsigned char>> gpt_step_bytes(Accelerator& accelerator, int threads) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  Generator gen(5);
  auto gpt = std::make_shared<nn::GPT>(
      nn::GPTConfig{.vocab_size = 65, .block_size = 64, .n_layer = 2, .n_head = 4, .n_embd = 128}, gen);
  auto adamw = std::make_shared<optim::AdamW>(gpt->parameters(), optim::AdamWOptions{.lr = 1e-2});
  auto [model, opt] = accelerator.prepare(gpt, adamw);
  auto tokens = [&] { return nograd::to_dtype(nograd::mul(rand({4, 64}, gen, DType::f64), 65.0), DType::i64); };
  const Tensor idx = tokens(), targets = tokens();
  opt->zero_grad();
  const Tensor loss = nn::cross_entropy((*model)(idx), targets);
  accelerator.backward(loss);
  opt->step();
  std::vector<std::vector<unsigned char>> out;
  for (const Tensor& t : std::vector<Tensor>{loss, (*model)(idx)}) {
    const auto* p = static_cast<const unsigned char*>(t.data_ptr());
    out.emplace_back(p, p + t.numel() * static_cast<int64_t>(dtype_size(t.dtype())));
  }
  for (const Tensor& p : model->parameters()) {
    const auto* b = static_cast<const unsigned char*>(p.data_ptr());
    out.emplace_back(b, b + p.numel() * static_cast<int64_t>(dtype_size(p.dtype())));
  }
  omp_set_num_threads(before);
  return out;
}

}  // namespace

TEST_CASE("deterministic = true sets the ops' switch, and a GPT training step then gives the same bits on 1 to 4 "
          "threads") {
  const DeterministicGuard restore(deterministic_mode());  // the Accelerator leaves the switch as it set it
  const TempConfig config("gradient_accumulation_steps: 1\n");
  AcceleratorOptions o = quiet(config);
  o.deterministic = true;
  Accelerator accelerator(o);
  CHECK(deterministic_mode());
  const auto one = gpt_step_bytes(accelerator, 1);
  for (int threads : {2, 3, 4}) CHECK_MESSAGE(gpt_step_bytes(accelerator, threads) == one, threads << " threads");

  o.deterministic = false;  // the next Accelerator sets the switch back
  Accelerator plain(o);
  CHECK_FALSE(deterministic_mode());
}

TEST_CASE("prepare returns one object as itself, and objects it does not know unchanged") {
  const TempConfig config("");
  Accelerator accelerator(quiet(config));
  Generator gen(1);
  auto model = std::make_shared<nn::Linear>(2, 2, true, gen);
  std::shared_ptr<nn::Linear> net = accelerator.prepare(model);  // not a 1-tuple
  CHECK(net == model);
  auto other = std::make_shared<nn::Linear>(2, 2, true, gen);
  auto [second, count, name] = accelerator.prepare(other, 42, std::string("run-7"));
  CHECK(second == other);
  CHECK(count == 42);
  CHECK(name == "run-7");
}

TEST_CASE("trace_dir: the first of two live Accelerators records, the second shares its timeline, the file has both, "
          "and a background save's write") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("accel_test_accelerator_trace_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  AcceleratorOptions options;
  options.print_settings = false;
  options.trace_dir = dir.string();
  {
    Accelerator first(options);
    CHECK(timeline::enabled());
    Accelerator second(options);  // must not throw "already recording"
    Generator gen(1);
    auto model = second.prepare(std::make_shared<nn::Linear>(3, 2, true, gen));
    second.backward(sum((*model)(ones({4, 3}))));
    SaveStateOptions async;
    async.async = true;
    first.save_state((dir / "checkpoint").string(), async);  // still writing when first ends
  }
  CHECK_FALSE(timeline::enabled());
  std::ifstream in(dir / "accel_trace_rank0.json");
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str().find("\"name\":\"forward\"") != std::string::npos);
  CHECK(text.str().find("\"name\":\"backward\"") != std::string::npos);
  CHECK(text.str().find("\"name\":\"checkpoint write\"") != std::string::npos);
  CHECK(text.str().find("\"name\":\"checkpoint writer\"") != std::string::npos);  // the thread's track
  std::filesystem::remove_all(dir);
}
