// Loading into a model under ZeRO, on 2 and 4 ranks: load_model into a deferred-init model prepared
// under FULL_SHARD reads only each rank's slices of the file, checks the keys first, and trains as the
// model loaded whole before prepare; load_model before prepare makes the file the deferred model's
// init, which prepare reads as it materialises, equal to loading after prepare (and load_state_dict of
// a state in memory does the same); load_state reads only
// each rank's runs of the shard files, stays under twice the rank's share of the state and resumes
// bitwise; and a load that fails part way puts back what every rank held, bitwise, under every stage.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <map>

#include "runtime/safetensors.h"
#include "tensor/meta_tensor.h"
#include "zero_support.h"

namespace test {

namespace {

// A temporary safetensors file of state, one per rank (every rank writes the same bytes).
std::string saved_state_file(const nn::StateDict& state, const std::string& tag) {
  const auto path = std::filesystem::temp_directory_path() /
                    fmt::format("accel_load_model_{}_{}_{}.safetensors", tag, getpid(), world()->rank());
  save_safetensors(path.string(), state);
  return path.string();
}

AcceleratorOptions options_for_stage(int stage, const std::string& precision, int hybrid_shard_size = 0) {
  AcceleratorOptions o = options();
  o.mixed_precision = precision;
  if (hybrid_shard_size > 0)
    o.fsdp_plugin = FSDPPlugin{.sharding_strategy = ShardingStrategy::hybrid_shard, .auto_wrap = {},
                               .hybrid_shard_size = hybrid_shard_size};
  else if (stage == 3)
    o.fsdp_plugin = FSDPPlugin{.sharding_strategy = ShardingStrategy::full_shard, .auto_wrap = {}};
  else if (stage > 0)
    o.deepspeed_plugin = DeepSpeedPlugin{.zero_stage = stage, .gradient_accumulation_steps = std::nullopt};
  return o;
}

// Five AdamW steps of a prepared wide MLP on rank-dependent data: the losses.
std::vector<double> five_steps(Accelerator& accelerator, nn::Module& net, optim::Optimizer& opt) {
  std::vector<double> losses;
  for (int step = 0; step < 5; ++step) {
    Generator gen(static_cast<uint64_t>(100 * step + accelerator.process_index()));
    opt.zero_grad();
    Tensor loss;
    {
      auto autocast = accelerator.autocast();
      loss = nn::mse_loss(to(net.forward(randn({4, 256}, gen)), DType::f32), randn({4, 256}, gen));
    }
    losses.push_back(loss.item());
    accelerator.backward(loss);
    opt.step();
  }
  return losses;
}

}  // namespace

TEST_CASE("load_model: a deferred-init model prepared under FULL_SHARD takes a file's weights from its slices alone, "
          "and trains as the model loaded whole before prepare") {
  const nn::StateDict pretrained = make_wide_mlp(77)->state_dict();  // what the file holds
  const std::string file = saved_state_file(pretrained, "wide");
  const size_t full_bytes = 8 * (256 * 256 + 256) * sizeof(float);
  struct Case {
    int stage;
    const char* precision;
    int hybrid_shard_size;
  };
  for (const Case c : {Case{3, "no", 0}, Case{3, "bf16", 0}, Case{3, "no", 1}, Case{2, "no", 0}, Case{0, "no", 0}}) {
    INFO("rank ", world()->rank(), " of ", world()->size(), ", stage ", c.stage, ", ", std::string(c.precision),
         std::string(c.hybrid_shard_size ? ", HYBRID_SHARD" : ""));
    // The reference: a normal model loaded whole, then prepared.
    Accelerator reference_accelerator(options_for_stage(c.stage, c.precision, c.hybrid_shard_size));
    auto reference = make_wide_mlp(5);
    reference->load_state_dict(pretrained);
    auto reference_adamw = make_optimizer("adamw", reference->parameters());
    auto [reference_net, reference_opt] = reference_accelerator.prepare(reference, reference_adamw);
    const std::vector<double> reference_losses = five_steps(reference_accelerator, *reference_net, *reference_opt);
    const std::vector<unsigned char> reference_final = bytes_of(reference_accelerator.get_state_dict(*reference_net));

    Accelerator accelerator(options_for_stage(c.stage, c.precision, c.hybrid_shard_size));
    std::shared_ptr<nn::Sequential> model;
    {
      DeferredInit deferred;
      model = make_wide_mlp(5);  // its recipes draw other values than the file's
    }
    auto adamw = make_optimizer("adamw", model->parameters());
    auto [net, opt] = accelerator.prepare(model, adamw);
    world()->barrier();
    const size_t before = accelerator.memory_stats()[0].stats.allocated_bytes;
    accelerator.reset_peak_memory_stats();
    const nn::LoadResult result = accelerator.load_model(*net, file);
    const size_t load_peak = accelerator.memory_stats()[0].stats.peak_allocated_bytes - before;
    CHECK(result.missing.empty());
    CHECK(result.unexpected.empty());
    // get_state_dict gathers the f32 masters (under bf16 too): the file's values exactly.
    CHECK(bytes_of(accelerator.get_state_dict(*net)) == bytes_of(pretrained));
    if (c.stage == 3 && c.hybrid_shard_size != 1) {
      // Only the rank's slices were read: at most one parameter's slice at a time, never the model.
      INFO("load_model's peak ", load_peak, " bytes; the model is ", full_bytes);
      CHECK(load_peak <= (256 * 256 * sizeof(float)) / static_cast<size_t>(world()->size()) + 64 * 1024);
    }
    CHECK(five_steps(accelerator, *net, *opt) == reference_losses);
    CHECK(bytes_of(accelerator.get_state_dict(*net)) == reference_final);
  }
  std::filesystem::remove(file);
}

TEST_CASE("load_model before prepare: a deferred-init model takes the file as its init, prepare reads from it only "
          "what each rank keeps, and the run equals loading after prepare bitwise") {
  const nn::StateDict pretrained = make_wide_mlp(77)->state_dict();
  const std::string file = saved_state_file(pretrained, "before_prepare");
  const size_t full_bytes = 8 * (256 * 256 + 256) * sizeof(float), n = static_cast<size_t>(world()->size());
  struct Case {
    int stage;
    const char* precision;
    int hybrid_shard_size;
  };
  for (const Case c : {Case{3, "no", 0}, Case{3, "bf16", 0}, Case{3, "no", 1}, Case{2, "no", 0}, Case{0, "no", 0}}) {
    INFO("rank ", world()->rank(), " of ", n, ", stage ", c.stage, ", ", std::string(c.precision),
         std::string(c.hybrid_shard_size ? ", HYBRID_SHARD" : ""));
    // The reference: prepared, then loaded (which equals a normal model loaded whole, above).
    Accelerator reference_accelerator(options_for_stage(c.stage, c.precision, c.hybrid_shard_size));
    std::shared_ptr<nn::Sequential> reference;
    {
      DeferredInit deferred;
      reference = make_wide_mlp(5);
    }
    auto reference_adamw = make_optimizer("adamw", reference->parameters());
    auto [reference_net, reference_opt] = reference_accelerator.prepare(reference, reference_adamw);
    reference_accelerator.load_model(*reference_net, file);
    const std::vector<double> reference_losses = five_steps(reference_accelerator, *reference_net, *reference_opt);
    const std::vector<unsigned char> reference_final = bytes_of(reference_accelerator.get_state_dict(*reference_net));

    Accelerator accelerator(options_for_stage(c.stage, c.precision, c.hybrid_shard_size));
    std::shared_ptr<nn::Sequential> model;
    {
      DeferredInit deferred;
      model = make_wide_mlp(5);
    }
    world()->barrier();
    const size_t before = accelerator.memory_stats()[0].stats.allocated_bytes;
    accelerator.reset_peak_memory_stats();
    const nn::LoadResult result = accelerator.load_model(*model, file);
    CHECK(result.missing.empty());
    CHECK(result.unexpected.empty());
    for (const auto& [name, t] : model->state_dict()) CHECK_MESSAGE(t.is_meta(), name);  // nothing read yet
    auto adamw = make_optimizer("adamw", model->parameters());
    auto [net, opt] = accelerator.prepare(model, adamw);
    const size_t peak = accelerator.memory_stats()[0].stats.peak_allocated_bytes - before;
    if (c.stage == 3 && c.hybrid_shard_size != 1) {
      // As a deferred prepare without the file (test_deferred_init.cpp): the rank's shards (under
      // bf16 its 2-byte parameters and 4-byte master slices), and one unit's slice read at a time.
      INFO("load_model + prepare's peak ", peak, " bytes; the model is ", full_bytes);
      const size_t held = c.precision == std::string("bf16") ? full_bytes / n * 3 / 2 : full_bytes / n;
      const size_t unit_shard = (256 * 256 + 256) * sizeof(float) / n + sizeof(float);
      CHECK(peak <= held + 8 * sizeof(float) + unit_shard + 64 * 1024);
    }
    CHECK(bytes_of(accelerator.get_state_dict(*net)) == bytes_of(pretrained));
    CHECK(five_steps(accelerator, *net, *opt) == reference_losses);
    CHECK(bytes_of(accelerator.get_state_dict(*net)) == reference_final);
  }
  // A file that does not fit is refused before anything is recorded, as after prepare.
  nn::StateDict bad = pretrained;
  bad.pop_back();
  const std::string bad_file = saved_state_file(bad, "before_prepare_bad");
  Accelerator accelerator(options_for_stage(3, "no"));
  std::shared_ptr<nn::Sequential> model;
  {
    DeferredInit deferred;
    model = make_wide_mlp(5);
  }
  const uint64_t fingerprint = model->state_dict().back().second.storage()->recipe()->fingerprint();
  CHECK(error_of([&] { accelerator.load_model(*model, bad_file); })
            .find("load_state_dict: the state does not fit this Sequential: missing keys [" + pretrained.back().first) !=
        std::string::npos);
  CHECK(model->state_dict().back().second.storage()->recipe()->fingerprint() == fingerprint);
  std::filesystem::remove(file);
  std::filesystem::remove(bad_file);
}

TEST_CASE("load_state_dict before prepare: a deferred-init model takes a state in memory as its init, and trains as "
          "the model that load_model gave the same weights") {
  const nn::StateDict pretrained = make_wide_mlp(77)->state_dict();
  const std::string file = saved_state_file(pretrained, "state_dict_before_prepare");
  for (const auto& [stage, precision] : std::vector<std::pair<int, std::string>>{{3, "no"}, {3, "bf16"}, {2, "no"}, {0, "no"}}) {
    INFO("rank ", world()->rank(), ", stage ", stage, ", ", precision);
    auto run = [&](bool from_memory) {
      Accelerator accelerator(options_for_stage(stage, precision));
      std::shared_ptr<nn::Sequential> model;
      {
        DeferredInit deferred;
        model = make_wide_mlp(5);
      }
      if (from_memory) {
        const nn::LoadResult result = model->load_state_dict(pretrained);
        CHECK(result.missing.empty());
        for (const auto& [name, t] : model->state_dict()) CHECK_MESSAGE(t.is_meta(), name);  // read by prepare
      } else {
        accelerator.load_model(*model, file);
      }
      auto adamw = make_optimizer("adamw", model->parameters());
      auto [net, opt] = accelerator.prepare(model, adamw);
      CHECK(bytes_of(accelerator.get_state_dict(*net)) == bytes_of(pretrained));
      const std::vector<double> losses = five_steps(accelerator, *net, *opt);
      return std::make_pair(losses, bytes_of(accelerator.get_state_dict(*net)));
    };
    CHECK(run(true) == run(false));
  }
  std::filesystem::remove(file);
}

TEST_CASE("load_state under FULL_SHARD reads only the rank's runs of the shard files: its peak stays under twice its "
          "share of the state, and the resumed run equals the uninterrupted one bitwise") {
  // The full state: 526,336 f32 parameters and AdamW's two moments of each.
  const size_t full_state_bytes = 3 * 8 * (256 * 256 + 256) * sizeof(float);
  const size_t n = static_cast<size_t>(world()->size());
  const std::string dir =
      (std::filesystem::temp_directory_path() / fmt::format("accel_load_state_lazy_{}_ranks", n)).string();
  struct Case {
    int stage;
    const char* precision;
  };
  for (const Case c : {Case{3, "no"}, Case{3, "bf16"}, Case{2, "no"}, Case{0, "no"}}) {
    INFO("rank ", world()->rank(), " of ", n, ", stage ", c.stage, ", ", std::string(c.precision));
    if (world()->rank() == 0) std::filesystem::remove_all(dir);
    world()->barrier();
    Accelerator saving(options_for_stage(c.stage, c.precision));
    auto model = make_wide_mlp(5);
    auto adamw = make_optimizer("adamw", model->parameters());
    auto [net, opt] = saving.prepare(model, adamw);
    five_steps(saving, *net, *opt);
    // Under DDP the model is written as Hugging Face's indexed shards (three of them); under ZeRO as
    // per-rank shards.
    saving.save_state(dir, {.max_shard_bytes = c.stage == 0 ? 1 << 20 : int64_t{10} << 30});
    const std::vector<unsigned char> saved = bytes_of(saving.get_state_dict(*net));
    const std::vector<double> uninterrupted = five_steps(saving, *net, *opt);
    const std::vector<unsigned char> uninterrupted_final = bytes_of(saving.get_state_dict(*net));

    Accelerator resuming(options_for_stage(c.stage, c.precision));
    auto fresh = make_wide_mlp(9);
    auto fresh_adamw = make_optimizer("adamw", fresh->parameters());
    auto [fresh_net, fresh_opt] = resuming.prepare(fresh, fresh_adamw);
    five_steps(resuming, *fresh_net, *fresh_opt);  // AdamW state of its own, for the load to replace
    world()->barrier();
    const size_t before = resuming.memory_stats()[0].stats.allocated_bytes;
    resuming.reset_peak_memory_stats();
    resuming.load_state(dir);
    const size_t load_peak = resuming.memory_stats()[0].stats.peak_allocated_bytes - before;
    if (c.stage == 3) {
      // What a rank holds above its steady state while loading: the copy of its share kept to put
      // back on failure, the optimizer slices read before they replace the old state, and one
      // parameter's run at a time (measured 1.7x its share at 2 ranks, 1.8x at 4). Reading the whole
      // state and gathering it for the copy took 18.8 MB at 2 ranks and 18.0 MB at 4.
      INFO("load_state's peak ", load_peak, " bytes; the full state is ", full_state_bytes);
      CHECK(load_peak <= 2 * full_state_bytes / n + 64 * 1024);
    }
    CHECK(five_steps(resuming, *fresh_net, *fresh_opt) == uninterrupted);
    CHECK(bytes_of(resuming.get_state_dict(*fresh_net)) == uninterrupted_final);
    // load_model takes the checkpoint directory's model, in either layout, into a plain model.
    CHECK(std::filesystem::exists(std::filesystem::path(dir) /
                                  (c.stage == 0 ? "model.safetensors.index.json" : "model.shards.json")));
    Accelerator plain(options_for_stage(0, "no"));
    auto copy = make_wide_mlp(11);
    plain.load_model(*copy, dir);
    CHECK(bytes_of(copy->state_dict()) == saved);
    world()->barrier();
  }
  world()->barrier();
  if (world()->rank() == 0) std::filesystem::remove_all(dir);
}

TEST_CASE("a load_state that fails after the model and the optimizer took the checkpoint puts back what each rank "
          "held, bitwise, from its own shard under ZeRO") {
  // An object registered for checkpointing that refuses its state: it is applied after the model and
  // the optimizer, so both must be put back.
  struct RefusingObject {
    bool refuse = false;
    nn::StateDict state_dict() const { return {{"calls", scalar_tensor(1.0)}}; }
    void load_state_dict(const nn::StateDict&) const {
      if (refuse) throw Error("RefusingObject: refused");
    }
  };
  const size_t n = static_cast<size_t>(world()->size());
  const auto root = std::filesystem::temp_directory_path() / fmt::format("accel_load_state_put_back_{}_ranks", n);
  // The model's and the optimizer's files of a save, by name: the state of every rank exactly.
  auto saved_tensors = [](const std::filesystem::path& dir) {
    std::map<std::string, std::vector<unsigned char>> out;
    for (const auto& f : std::filesystem::directory_iterator(dir)) {
      const std::string name = f.path().filename().string();
      if (f.path().extension() == ".safetensors" && (name.rfind("model", 0) == 0 || name.rfind("optimizer", 0) == 0))
        out[name] = bytes_of(load_safetensors(f.path().string()).tensors);
    }
    return out;
  };
  struct Case {
    int stage;
    const char* precision;
  };
  for (const Case c : {Case{3, "no"}, Case{3, "bf16"}, Case{2, "no"}, Case{1, "bf16"}, Case{0, "no"}}) {
    INFO("rank ", world()->rank(), " of ", n, ", stage ", c.stage, ", ", std::string(c.precision));
    if (world()->rank() == 0) std::filesystem::remove_all(root);
    world()->barrier();
    Accelerator accelerator(options_for_stage(c.stage, c.precision));
    RefusingObject object;
    accelerator.register_for_checkpointing(object);
    auto model = make_wide_mlp(5);
    auto adamw = make_optimizer("adamw", model->parameters());
    auto [net, opt] = accelerator.prepare(model, adamw);
    five_steps(accelerator, *net, *opt);
    accelerator.save_state((root / "checkpoint").string());
    five_steps(accelerator, *net, *opt);  // away from the checkpoint, so that a load would show
    accelerator.save_state((root / "before").string());
    object.refuse = true;
    const std::string error = error_of([&] { accelerator.load_state((root / "checkpoint").string()); });
    CHECK(error == fmt::format("load_state: {}: RefusingObject: refused",
                               (root / "checkpoint" / "custom_checkpoint_0.safetensors").string()));
    object.refuse = false;
    accelerator.save_state((root / "after").string());
    const auto before = saved_tensors(root / "before"), after = saved_tensors(root / "after");
    CHECK(before.size() >= 2);
    CHECK(before == after);
    world()->barrier();  // every rank has read the files before rank 0 removes them
  }
  world()->barrier();
  if (world()->rank() == 0) std::filesystem::remove_all(root);
}

TEST_CASE("load_model refuses a file that does not fit the model before it changes anything, naming the keys") {
  nn::StateDict pretrained = make_wide_mlp(77)->state_dict();
  const std::string missing_key = pretrained.back().first;
  pretrained.pop_back();
  pretrained.push_back({"extra.weight", zeros({2})});
  const std::string file = saved_state_file(pretrained, "bad");
  Accelerator accelerator(options_for_stage(3, "no"));
  auto model = make_wide_mlp(5);
  const std::vector<unsigned char> before = bytes_of(model->state_dict());
  auto sgd = make_optimizer("sgd", model->parameters());
  auto [net, opt] = accelerator.prepare(model, sgd);
  const std::string message = error_of([&] { accelerator.load_model(*net, file); });
  INFO(message);
  CHECK(message.find("load_state_dict: the state does not fit this Sequential: missing keys [" + missing_key + "]") !=
        std::string::npos);
  CHECK(message.find("unexpected keys [extra.weight]") != std::string::npos);
  CHECK(bytes_of(accelerator.get_state_dict(*net)) == before);
  // Not strict: the keys that fit are loaded, and the result lists the others.
  const nn::LoadResult result = accelerator.load_model(*net, file, /*strict=*/false);
  CHECK(result.missing == std::vector<std::string>{missing_key});
  CHECK(result.unexpected == std::vector<std::string>{"extra.weight"});
  CHECK(accelerator.get_state_dict(*net)[0].second.to_vector<float>() == pretrained[0].second.to_vector<float>());
  std::filesystem::remove(file);
}

}  // namespace test
