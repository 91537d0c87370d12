// Exact resume on every rank count the suite runs (1, 2, 4): a run that saves after K steps and is
// continued by fresh objects that load the checkpoint gives bitwise the same per-step losses, weights
// and optimizer state as a run of 2K steps that never stopped. Mid-epoch, with dropout, an LR
// schedule, AdamW; fp16 after a skipped step; gradient accumulation saved at a window boundary. Also
// automatic naming with total_limit and "latest", a torn checkpoint, and the errors of a bad load.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "runtime/checkpoint/checkpoint_dir.h"
#include "support.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/views.h"

namespace test {

namespace {

namespace fs = std::filesystem;

struct Spec {
  std::string mixed_precision = "no";
  int accumulation = 1;
  int64_t inject_inf_at = -1;  // a step whose grads get an inf on the last rank (fp16: skipped)
  bool async = false;          // save in the background, and train on while it writes
  int64_t max_shard_bytes = int64_t{10} << 30;
  int zero_stage = 0;
  bool param_groups = false;   // AdamW with GPT-2's decay split (tests/ddp/support.cpp)
};

// What a run leaves behind to compare.
struct Trace {
  std::vector<double> losses;  // per step, from the step it resumed at
  std::vector<double> weights;
  std::vector<double> optimizer_state;
  double loss_scale = 0;
};

// 8 -> 16 -> dropout -> 4, initialised from seed: a resumed run starts from other weights and must
// take the checkpoint's.
std::shared_ptr<nn::Sequential> make_model(uint64_t seed) {
  Generator gen(seed);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(8, 16, true, gen));
  model->push_back(std::make_shared<nn::Tanh>());
  model->push_back(std::make_shared<nn::Dropout>(0.2, gen));
  model->push_back(std::make_shared<nn::Linear>(16, 4, true, gen));
  return model;
}

// The full weights, gathered where ZeRO-3 shards them (its parameters hold no data between steps).
std::vector<double> full_weights(const Accelerator& accelerator, const nn::Module& model) {
  std::vector<double> out;
  for (const auto& [name, t] : accelerator.get_state_dict(model))
    for (double v : nograd::to_dtype(nograd::contiguous(t), DType::f64).to_vector<double>()) out.push_back(v);
  return out;
}

std::vector<double> flat(const optim::StateDict& state) {
  std::vector<double> out;
  for (const auto& [k, t] : state)
    for (double v : nograd::to_dtype(nograd::contiguous(t), DType::f64).to_vector<double>()) out.push_back(v);
  return out;
}

// Trains from step `from` to step `until` (micro-steps with accumulation), saving at `to` when
// save_dir is set (there), after first loading load_dir when that is set.
Trace run(const Spec& spec, int64_t from, int64_t until, const std::string& save_dir, const std::string& load_dir,
          uint64_t seed) {
  AcceleratorOptions o = options();
  o.mixed_precision = spec.mixed_precision;
  o.gradient_accumulation_steps = spec.accumulation;
  if (spec.zero_stage > 0)
    o.deepspeed_plugin = DeepSpeedPlugin{.zero_stage = spec.zero_stage, .gradient_accumulation_steps = std::nullopt};
  Accelerator accelerator(o);
  auto model = make_model(seed);
  auto optimizer = spec.param_groups
                       ? make_optimizer("adamw_groups", model->parameters())
                       : std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 3e-3});
  optim::LRScheduler schedule = optim::LRScheduler::cosine(*optimizer, 2, 40, 1e-4);
  DataLoader loader(regression_data(96), {.batch_size = 4, .shuffle = true, .seed = 5});
  auto [net, opt, data] = accelerator.prepare(model, optimizer, loader);
  accelerator.register_for_checkpointing(schedule);
  if (!load_dir.empty()) CHECK(accelerator.load_state(load_dir) == load_dir);
  Trace trace;
  int64_t step = from;
  for (int64_t epoch = data.epoch(); step < until; ++epoch) {
    data.set_epoch(epoch);
    for (const Batch& batch : data) {
      auto window = accelerator.accumulate();
      opt->zero_grad();
      Tensor loss;
      {
        auto autocast = accelerator.autocast();
        loss = nn::mse_loss((*net)(batch[0]), batch[1]);
      }
      accelerator.backward(loss);
      if (step == spec.inject_inf_at && accelerator.process_index() == accelerator.num_processes() - 1)
        nograd::fill_(nograd::narrow(nograd::reshape(net->parameters()[0].grad(), {-1}), 0, 0, 1),
                      std::numeric_limits<double>::infinity());
      opt->step();
      if (accelerator.sync_gradients()) schedule.step();
      trace.losses.push_back(accelerator.reduce(to(loss, DType::f32), "mean").item());
      if (++step == until) break;  // before the loader produces another batch
    }
  }
  if (!save_dir.empty()) {
    accelerator.save_state(save_dir, {.async = spec.async, .max_shard_bytes = spec.max_shard_bytes});
    Trace saved = trace;
    saved.weights = full_weights(accelerator, *net);
    saved.optimizer_state = flat(opt->state_dict());
    saved.loss_scale = accelerator.loss_scaler() ? accelerator.loss_scaler()->scale() : 0;
    if (spec.async) {
      // Steps taken while the save writes must not reach it: it holds step `until`'s state.
      for (int i = 0; i < 3; ++i) {
        opt->zero_grad();
        accelerator.backward(nn::mse_loss((*net)(ones({4, 8})), zeros({4, 4})));
        opt->step();
      }
    }
    return saved;
  }
  trace.weights = full_weights(accelerator, *net);
  trace.optimizer_state = flat(opt->state_dict());
  trace.loss_scale = accelerator.loss_scaler() ? accelerator.loss_scaler()->scale() : 0;
  return trace;
}

void check_exact_resume(const Spec& spec, int64_t k) {
  const std::string root = shared_temp_dir();
  const Trace whole = run(spec, 0, 2 * k, "", "", 1);
  const Trace first = run(spec, 0, k, root + "/ckpt", "", 1);
  if (spec.max_shard_bytes < 1024) {  // 512, 64, 256 + 16 bytes: three shards of at most 300
    CHECK_FALSE(fs::exists(root + "/ckpt/model.safetensors"));
    CHECK(fs::exists(root + "/ckpt/model.safetensors.index.json"));
    CHECK(fs::exists(root + "/ckpt/model-00003-of-00003.safetensors"));
  }
  const Trace second = run(spec, k, 2 * k, "", root + "/ckpt", 77);  // other init: the checkpoint wins
  REQUIRE(whole.losses.size() == static_cast<size_t>(2 * k));
  std::vector<double> resumed = first.losses;
  resumed.insert(resumed.end(), second.losses.begin(), second.losses.end());
  for (size_t i = 0; i < resumed.size() && i < whole.losses.size(); ++i)
    if (resumed[i] != whole.losses[i]) {
      MESSAGE(fmt::format("first differing step {}: resumed {:.17g}, whole {:.17g}", i, resumed[i], whole.losses[i]));
      break;
    }
  CHECK(resumed == whole.losses);  // bitwise, step by step
  CHECK(second.weights == whole.weights);
  CHECK(second.optimizer_state == whole.optimizer_state);
  CHECK(second.loss_scale == whole.loss_scale);
  CHECK(differs_across_ranks(second.weights) == "");
  world()->barrier();
  if (world()->rank() == 0) fs::remove_all(root);
}

}  // namespace

TEST_CASE("exact resume: a mid-epoch save with dropout, AdamW and a cosine schedule continues bit for bit") {
  // 96 samples in global batches of 4 per rank: 24, 12 or 6 steps an epoch; 7 steps is mid-epoch on
  // 1 and 2 ranks and past an epoch's end on 4.
  check_exact_resume({}, 7);
}

TEST_CASE("exact resume: fp16 after a skipped step keeps its halved loss scale") {
  check_exact_resume({.mixed_precision = "fp16", .inject_inf_at = 2}, 6);
}

TEST_CASE("exact resume: gradient accumulation saved at a window boundary") {
  check_exact_resume({.accumulation = 2}, 8);
}

TEST_CASE("exact resume: an async save holds the state of its step while training goes on") {
  check_exact_resume({.async = true}, 7);
}

TEST_CASE("exact resume: parameter groups, replicated and under ZeRO stages 1 and 3 (state gathered and re-cut)") {
  for (const int stage : {0, 1, 3}) {
    INFO("zero stage ", stage);
    check_exact_resume({.zero_stage = stage, .param_groups = true}, 7);
  }
}

TEST_CASE("exact resume: a model beyond max_shard_bytes is written as Hugging Face shards with an index") {
  check_exact_resume({.max_shard_bytes = 300}, 5);
}

TEST_CASE("a prepared LRScheduler is saved and restored with the checkpoint") {
  const std::string root = shared_temp_dir();
  auto schedule_of = [](Accelerator& accelerator, uint64_t seed) {
    auto model = make_model(seed);
    auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.1});
    auto schedule = std::make_shared<optim::LRScheduler>(optim::LRScheduler::cosine(*optimizer, 2, 20, 1e-3));
    auto [net, opt, sched] = accelerator.prepare(model, optimizer, schedule);
    CHECK(sched == schedule);
    return std::tuple{net, opt, sched};  // the Accelerator holds its model weakly
  };
  Accelerator saving(options());
  auto [net, opt, schedule] = schedule_of(saving, 1);
  for (int i = 0; i < 7; ++i) schedule->step();
  saving.save_state(root + "/ckpt");
  schedule->step();
  const double next_lr = opt->lr();
  Accelerator loading(options());
  auto [fresh_net, fresh_opt, fresh] = schedule_of(loading, 2);
  loading.load_state(root + "/ckpt");
  fresh->step();
  CHECK(fresh_opt->lr() == next_lr);  // it continued from step 7, not from 0
  world()->barrier();
  if (world()->rank() == 0) fs::remove_all(root);
}

TEST_CASE("save_state refuses the middle of an accumulation window") {
  const std::string root = shared_temp_dir();
  AcceleratorOptions o = options();
  o.gradient_accumulation_steps = 2;
  Accelerator accelerator(o);
  auto model = make_model(1);
  auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.1});
  auto [net, opt] = accelerator.prepare(model, optimizer);
  {
    auto window = accelerator.accumulate();
    accelerator.backward(nn::mse_loss((*net)(ones({2, 8})), zeros({2, 4})));
    opt->step();
  }
  CHECK(error_of([&] { accelerator.save_state(root + "/mid"); }) ==
        "save_state: called inside an accumulation window, whose accumulated grads a checkpoint does not hold; save "
        "after the optimizer step that ends the window");
  world()->barrier();
  if (world()->rank() == 0) fs::remove_all(root);
}

TEST_CASE("automatic naming: checkpoint_<n>, total_limit keeps the newest, latest skips a torn one") {
  const std::string root = shared_temp_dir();
  AcceleratorOptions o = options();
  o.project_configuration = {.project_dir = root, .automatic_checkpoint_naming = true, .total_limit = 2};
  Accelerator accelerator(o);
  auto model = make_model(1);
  auto net = accelerator.prepare(model);
  std::vector<std::string> saved;
  for (int i = 0; i < 3; ++i) saved.push_back(accelerator.save_state());
  CHECK(saved[2] == root + "/checkpoints/checkpoint_2");
  const std::vector<fs::path> kept = complete_checkpoints(root);
  REQUIRE(kept.size() == 2);
  CHECK(kept[0].filename() == "checkpoint_1");
  CHECK(kept[1].filename() == "checkpoint_2");
  // A save that died before its commit: a directory without the marker.
  world()->barrier();
  if (world()->rank() == 0) fs::create_directories(root + "/checkpoints/checkpoint_3");
  world()->barrier();
  CHECK(accelerator.load_state() == root + "/checkpoints/checkpoint_2");
  CHECK(accelerator.load_state("latest") == root + "/checkpoints/checkpoint_2");
  CHECK(error_of([&] { accelerator.load_state(root + "/checkpoints/checkpoint_3"); }) ==
        fmt::format("load_state: '{}/checkpoints/checkpoint_3' is an incomplete checkpoint (no COMPLETE marker: its "
                    "save did not finish); load an earlier one or \"latest\"",
                    root));
  world()->barrier();
  if (world()->rank() == 0) fs::remove_all(root);
}

TEST_CASE("a bad load names the file and the key, and changes nothing") {
  const std::string root = shared_temp_dir();
  Accelerator accelerator(options());
  auto model = make_model(1);
  auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.1});
  auto [net, opt] = accelerator.prepare(model, optimizer);
  accelerator.save_state(root + "/good");
  // Another model: the same kinds of layers, other widths.
  Generator gen(3);
  auto other = std::make_shared<nn::Sequential>();
  other->push_back(std::make_shared<nn::Linear>(8, 5, true, gen));
  Accelerator second(options());
  auto other_opt = std::make_shared<optim::SGD>(other->parameters(), optim::SGDOptions{.lr = 0.1});
  auto [o_net, o_opt] = second.prepare(other, other_opt);
  const std::vector<double> before = weights_of(*o_net);
  const std::string message = error_of([&] { second.load_state(root + "/good"); });
  CHECK(message.find(root + "/good/model.safetensors") != std::string::npos);
  CHECK(message.find("0.weight") != std::string::npos);
  CHECK(weights_of(*o_net) == before);  // nothing half-loaded
  // A truncated file.
  world()->barrier();
  if (world()->rank() == 0) fs::resize_file(root + "/good/model.safetensors", 20);
  world()->barrier();
  const std::vector<double> mine = weights_of(*net);
  CHECK(error_of([&] { accelerator.load_state(root + "/good"); }).find("model.safetensors") != std::string::npos);
  CHECK(weights_of(*net) == mine);
  world()->barrier();
  if (world()->rank() == 0) fs::remove_all(root);
}

namespace {

// On rank 0: a copy of checkpoint `good` named `name`, changed by edit; every rank then sees it.
std::string variant(const std::string& good, const std::string& name, const std::function<void(const fs::path&)>& edit) {
  const fs::path dir = fs::path(good).parent_path() / name;
  world()->barrier();
  if (world()->rank() == 0) {
    fs::copy(good, dir, fs::copy_options::recursive);
    edit(dir);
  }
  world()->barrier();
  return dir.string();
}

void edit_state(const fs::path& dir, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json state = nlohmann::json::parse(std::ifstream(dir / "accelerator_state.json"));
  edit(state);
  std::ofstream(dir / "accelerator_state.json") << state.dump(2);
}

}  // namespace

TEST_CASE("load_state refuses a newer format, other counts, a data position this run cannot take, a missing "
          "optimizer key and a corrupt header, names each, and changes nothing") {
  const std::string root = shared_temp_dir();
  Accelerator accelerator(options());
  auto model = make_model(1);
  auto optimizer = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 1e-2});
  DataLoader loader(regression_data(64), {.batch_size = 4});
  auto [net, opt, data] = accelerator.prepare(model, optimizer, loader);
  int64_t steps = 0;
  for (const Batch& batch : data) {
    opt->zero_grad();
    accelerator.backward(nn::mse_loss((*net)(batch[0]), batch[1]));
    opt->step();
    if (++steps == 3) break;
  }
  const std::string good = accelerator.save_state(root + "/good");
  std::string dropped_key;
  for (const auto& [key, t] : load_safetensors(good + "/optimizer.safetensors").tensors)
    if (dropped_key.empty() && key.rfind("state.", 0) == 0) dropped_key = key;
  REQUIRE_FALSE(dropped_key.empty());
  const std::vector<double> weights = weights_of(*net);
  const std::vector<double> state = flat(opt->state_dict());
  auto refused = [&](const std::string& dir) {
    const std::string message = error_of([&] { accelerator.load_state(dir); });
    CHECK(weights_of(*net) == weights);  // nothing half-loaded
    CHECK(flat(opt->state_dict()) == state);
    return message;
  };

  const std::string newer = variant(good, "newer", [](const fs::path& d) { edit_state(d, [](auto& s) { s["format"] = 99; }); });
  CHECK(refused(newer) == fmt::format("load_state: {}/accelerator_state.json: format 99 is not one this accel ({}) reads "
                                      "(1 to 1); a newer accel wrote it",
                                      newer, ACCEL_VERSION));
  const std::string objects = variant(good, "objects", [](const fs::path& d) { edit_state(d, [](auto& s) { s["objects"] = 1; }); });
  CHECK(refused(objects).find("holds 1 objects, but 0 are prepared or registered here") != std::string::npos);
  const std::string position = variant(good, "position", [](const fs::path& d) {
    edit_state(d, [](auto& s) { s["loaders"][0]["samples_seen"] = s["loaders"][0]["samples_seen"].template get<int64_t>() + 1; });
  });
  CHECK(refused(position).find(fmt::format("had seen {} samples of its epoch, which is not a whole number of this "
                                           "run's global batches of {}",
                                           3 * 4 * world()->size() + 1, 4 * world()->size())) != std::string::npos);
  const std::string missing = variant(good, "missing", [&](const fs::path& d) {
    SafetensorsContents contents = load_safetensors((d / "optimizer.safetensors").string());
    std::erase_if(contents.tensors, [&](const auto& entry) { return entry.first == dropped_key; });
    save_safetensors((d / "optimizer.safetensors").string(), contents.tensors, contents.metadata);
  });
  const std::string missing_message = refused(missing);
  INFO(missing_message, " / dropped ", dropped_key);
  CHECK(missing_message.find(missing + "/optimizer.safetensors: key '" + dropped_key + "' is missing") != std::string::npos);
  const std::string corrupt = variant(good, "corrupt", [](const fs::path& d) {
    std::fstream f(d / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.write("\xff\xff\xff\xff\xff\xff\xff\x7f", 8);  // a header length beyond the file
  });
  CHECK(refused(corrupt).find(corrupt + "/model.safetensors") != std::string::npos);
  world()->barrier();
  if (world()->rank() == 0) fs::remove_all(root);
}

}  // namespace test
