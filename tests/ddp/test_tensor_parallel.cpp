// The TensorParallel strategy through the Accelerator against one process without one, on the same
// global batches and init: TP=2 on 2 ranks, TP=4 and a 2 x 2 DP x TP mesh on 4, over 10 clipped
// AdamW steps (losses, grad norms and the full parameters within 1e-5 relative). Also: the replicated
// parameters' grads bitwise equal on every rank, the tp ranks of a replica fed the same batch,
// accumulation, bf16 and fp16, gather_for_metrics, a TP=2 checkpoint (per-rank shards with global
// offsets) resumed at TP=1 and at TP=4, the settings line, and the refusals. And ZeRO 1, 2 and 3 over
// the dp ranks of the TP model against the same one process: their collectives counted, their
// optimizer slices measured, accumulation, bf16 and fp16, and their checkpoints resumed elsewhere; a
// rank (with or without ZeRO 3) reads only the elements it holds, and load_state gathers nothing; a
// GPT built under DeferredInit is materialised part by part, bitwise the normal build, unbroadcast.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../counting_state_reader.h"
#include "runtime/checkpoint/training_checkpoint.h"
#include "runtime/safetensors.h"
#include "support.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"

namespace test {

namespace {

constexpr int64_t kSequences = 40, kSeqLen = 6, kGlobalBatch = 4;
constexpr double kMaxNorm = 0.5;  // below the first steps' norms, so the clip acts

nn::GPTConfig tp_config() {
  return {.vocab_size = 30, .block_size = 8, .n_layer = 2, .n_head = 4, .n_embd = 16, .tie_weights = true};
}

std::shared_ptr<nn::GPT> make_gpt(uint64_t seed) {
  Generator gen(seed);
  return std::make_shared<nn::GPT>(tp_config(), gen);
}

// Token ids and next-token targets, the same on every rank.
std::shared_ptr<TensorDataset> token_data() {
  std::mt19937_64 engine(77);
  std::uniform_int_distribution<int64_t> id(0, tp_config().vocab_size - 1);
  std::vector<int64_t> ids(kSequences * kSeqLen), targets(kSequences * kSeqLen);
  for (int64_t& v : ids) v = id(engine);
  for (int64_t& v : targets) v = id(engine);
  return std::make_shared<TensorDataset>(
      std::vector<Tensor>{from_vector(ids, {kSequences, kSeqLen}), from_vector(targets, {kSequences, kSeqLen})});
}

struct Run {
  std::vector<double> losses, norms;
  nn::StateDict params;  // the full model's, by name
  // The elements of this rank's parts of the model, and of the parameters its optimizer updates
  // (1/dp of the parts under ZeRO, plus padding).
  int64_t local_numel = 0, updated_numel = 0;
  std::vector<std::string> collectives;  // during the training steps, "op at site"
  std::vector<std::string> load_collectives;  // during load_state
};

// One process, no Accelerator: the global batches in order, the mean loss, the clip by hand.
Run reference_run(int steps, int64_t batch = kGlobalBatch) {
  auto model = make_gpt(31);
  optim::AdamW opt(model->parameters(), {.lr = 3e-3});
  DataLoader data(token_data(), {.batch_size = batch});
  Run run;
  for (const Batch& batch : data) {
    if (static_cast<int>(run.losses.size()) == steps) break;
    opt.zero_grad();
    const Tensor loss = model->loss(batch[0], batch[1]);
    backward(loss);
    double sum_sq = 0;
    for (const Tensor& p : model->parameters())
      sum_sq += nograd::sum(nograd::mul(nograd::to_dtype(p.grad(), DType::f64), nograd::to_dtype(p.grad(), DType::f64)))
                    .item();
    const double norm = std::sqrt(sum_sq), coefficient = kMaxNorm / (norm + 1e-6);
    if (coefficient < 1.0)
      for (const Tensor& p : model->parameters()) nograd::mul_(p.grad(), coefficient);
    opt.step();
    run.losses.push_back(loss.item());
    run.norms.push_back(norm);
  }
  for (const auto& [name, p] : model->named_parameters()) run.params.emplace_back(name, nograd::clone(p));
  return run;
}

struct TpSpec {
  int tp_size = 2;
  int from = 0, until = 10;      // steps
  std::string save_dir = "", load_dir = "";
  bool check_replicated = false;  // assert the replicated grads bitwise equal on every rank
  int accumulation = 1;
  std::string mixed_precision = "no";
  int zero_stage = 0;  // 1, 2 or 3: ZeRO over the dp ranks of the tensor-parallel model
  // Stage 3 through FSDPPlugin FULL_SHARD with these auto_wrap types (else DeepSpeedPlugin: one root unit).
  std::vector<std::string> wrap{};
  // > 0: FSDPPlugin HYBRID_SHARD over the dp ranks, this many per shard group (with wrap's units).
  int hybrid_shard_size = 0;
};

// Through the Accelerator with split_batches: each global batch of 4 split between the dp replicas.
Run accelerated_run(const TpSpec& spec) {
  Run run;
  AcceleratorOptions o = options();
  o.split_batches = true;
  o.gradient_accumulation_steps = spec.accumulation;
  o.mixed_precision = spec.mixed_precision;
  if (spec.tp_size > 1) o.parallelism_config = ParallelismConfig{.tp_size = spec.tp_size};
  if (spec.hybrid_shard_size > 0)
    o.fsdp_plugin = FSDPPlugin{.sharding_strategy = ShardingStrategy::hybrid_shard,
                               .auto_wrap = {.module_types = spec.wrap},
                               .hybrid_shard_size = spec.hybrid_shard_size};
  else if (!spec.wrap.empty())
    o.fsdp_plugin = FSDPPlugin{.sharding_strategy = ShardingStrategy::full_shard, .auto_wrap = {.module_types = spec.wrap}};
  else if (spec.zero_stage > 0)
    o.deepspeed_plugin = DeepSpeedPlugin{.zero_stage = spec.zero_stage, .gradient_accumulation_steps = std::nullopt};
  Accelerator accelerator(o);
  auto model = make_gpt(31 + static_cast<uint64_t>(world()->rank()));  // prepare takes rank 0's
  auto optimizer = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 3e-3});
  DataLoader loader(token_data(), {.batch_size = kGlobalBatch});
  auto [net, opt, data] = accelerator.prepare(model, optimizer, loader);
  if (!spec.load_dir.empty()) {
    const LedgerMarks before_load = mark_ledgers();
    accelerator.load_state(spec.load_dir);
    run.load_collectives = collectives_since(before_load);
  }
  const std::map<std::string, nn::parallel::TensorSplit> splits = nn::parallel::tensor_splits(*net);
  for (const Tensor& p : net->parameters()) run.local_numel += p.numel();
  for (const Tensor& p : accelerator.strategy().updating_optimizer(*opt).params()) run.updated_numel += p.numel();
  const LedgerMarks marks = mark_ledgers();
  int step = spec.from;
  for (const Batch& batch : data) {
    // The ranks of one replica read the same rows: every rank's batch, compared within its tp group.
    const int dp_rank = accelerator.strategy().data_shard().rank;
    CHECK(batch[0].size(0) == kGlobalBatch / accelerator.strategy().data_shard().world_size);
    const std::vector<double> first_ids = all_ranks(nograd::sum(nograd::to_dtype(batch[0], DType::f64)).item());
    const std::vector<double> dp_of = all_ranks(dp_rank);
    for (size_t r = 0; r < first_ids.size(); ++r)
      for (size_t s = 0; s < first_ids.size(); ++s)
        if (dp_of[r] == dp_of[s]) CHECK(first_ids[r] == first_ids[s]);
    auto window = accelerator.accumulate();
    opt->zero_grad();
    Tensor loss;
    {
      auto autocast = accelerator.autocast();
      loss = net->loss(batch[0], batch[1]);
    }
    accelerator.backward(loss);
    if (spec.check_replicated)
      for (const auto& [name, p] : net->named_parameters())
        if (!splits.count(name)) {
          INFO(name);
          CHECK(differs_across_ranks(nograd::contiguous(nograd::to_dtype(p.grad(), DType::f64)).to_vector<double>()) ==
                "");
        }
    if (accelerator.sync_gradients()) run.norms.push_back(accelerator.clip_grad_norm(*net, kMaxNorm));
    opt->step();
    run.losses.push_back(accelerator.reduce(loss, "mean").item());
    if (++step == spec.until) break;  // before the loader produces another batch, which a save would count
  }
  run.collectives = collectives_since(marks);
  if (!spec.save_dir.empty()) accelerator.save_state(spec.save_dir);
  run.params = accelerator.get_state_dict(*net);
  return run;
}

// max |a - b| over max |b|, over every step or every parameter together.
void check_close(const std::vector<double>& got, const std::vector<double>& expected, const char* what) {
  REQUIRE(got.size() == expected.size());
  double scale = 0, worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    scale = std::max(scale, std::abs(expected[i]));
    worst = std::max(worst, std::abs(got[i] - expected[i]));
  }
  INFO(what, ": max |diff| ", worst, " against scale ", scale);
  CHECK(worst <= 1e-5 * scale);
}

void check_params(const nn::StateDict& got, const nn::StateDict& expected) {
  REQUIRE(got.size() == expected.size());
  std::vector<double> a, b;
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(expected[i].first);
    CHECK(got[i].first == expected[i].first);
    REQUIRE(got[i].second.shape() == expected[i].second.shape());
    for (double v : nograd::contiguous(nograd::to_dtype(got[i].second, DType::f64)).to_vector<double>()) a.push_back(v);
    for (double v : nograd::contiguous(nograd::to_dtype(expected[i].second, DType::f64)).to_vector<double>())
      b.push_back(v);
  }
  check_close(a, b, "parameters");
}

// A checkpoint of model and optimizer in `parts` shard files each, and no more.
void check_shard_files(const std::string& dir, int parts) {
  for (const char* stem : {"model", "optimizer"}) {
    int files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      files += entry.path().filename().string().rfind(std::string(stem) + ".shard-", 0) == 0;
    INFO(stem, " in ", dir);
    CHECK(files == parts);
    CHECK(std::filesystem::exists(fmt::format("{}/{}.shard-{:05d}-of-{:05d}.safetensors", dir, stem, parts, parts)));
  }
}

// Under TP x ZeRO each file holds at most one piece of each tensor: a rank's ZeRO slice of a part split
// along dim 1 is one run of the part, not one piece per row it crosses. Some of them are such slices.
void check_one_piece_per_tensor(const std::string& dir) {
  int dim1_part_runs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (file.find(".shard-") == std::string::npos) continue;
    const SafetensorsHeader header = load_safetensors_header(entry.path().string());
    const nlohmann::json pieces = nlohmann::json::parse(header.metadata.at("accel_pieces"));
    std::map<std::string, int> per_tensor;
    for (const SafetensorsEntry& e : header.tensors) {
      const bool piece = pieces.contains(e.name);
      ++per_tensor[piece ? pieces[e.name]["name"].get<std::string>() : e.name];
      dim1_part_runs += piece && pieces[e.name].contains("part_of") && pieces[e.name]["part_of"]["dim"] == 1;
    }
    for (const auto& [name, count] : per_tensor) {
      INFO(file, ": ", name);
      CHECK(count == 1);
    }
  }
  CHECK(dim1_part_runs > 0);
}

std::vector<int> tp_sizes() {
  const int world_size = world()->size();
  if (world_size == 4) return {2, 4};  // 2 x 2 DP x TP, and TP=4
  if (world_size == 2) return {2};
  return {};
}

}  // namespace

TEST_CASE("TensorParallel equals one process over 10 clipped AdamW steps: TP=2, TP=4 and 2 x 2 DP x TP") {
  if (tp_sizes().empty()) return;  // one rank has no tensor parallelism; the np 2 and np 4 runs check it
  const Run expected = reference_run(10);
  for (int tp : tp_sizes()) {
    INFO("tp_size ", tp, " of ", world()->size(), " ranks");
    const Run run = accelerated_run({.tp_size = tp, .check_replicated = true});
    check_close(run.losses, expected.losses, "losses");
    check_close(run.norms, expected.norms, "grad norms");
    CHECK(run.norms[0] > kMaxNorm);  // the clip acted
    check_params(run.params, expected.params);
  }
}

TEST_CASE("TensorParallel with gradient accumulation equals one process on the windows' batches") {
  if (tp_sizes().empty()) return;  // one rank has no tensor parallelism; the np 2 and np 4 runs check it
  const Run expected = reference_run(5, 2 * kGlobalBatch);  // 5 windows of 2 micro-batches of 4
  for (int tp : tp_sizes()) {
    INFO("tp_size ", tp, " of ", world()->size(), " ranks, 2 micro-batches per step");
    const Run run = accelerated_run({.tp_size = tp, .accumulation = 2});
    check_close(run.norms, expected.norms, "grad norms");
    check_params(run.params, expected.params);
  }
}

TEST_CASE("TensorParallel trains in bf16 and fp16: every step's loss within 1e-2 of the f32 run's") {
  if (tp_sizes().empty()) return;  // one rank has no tensor parallelism; the np 2 and np 4 runs check it
  const Run expected = reference_run(10);
  for (const char* precision : {"bf16", "fp16"}) {
    INFO(precision, ", tp_size 2 of ", world()->size(), " ranks");
    const Run run = accelerated_run({.tp_size = 2, .mixed_precision = precision});
    REQUIRE(run.losses.size() == expected.losses.size());
    for (size_t i = 0; i < run.losses.size(); ++i)
      CHECK(std::abs(run.losses[i] - expected.losses[i]) <= 1e-2 * expected.losses[i]);
    CHECK(run.losses.back() < run.losses.front());
  }
}

TEST_CASE("gather_for_metrics under TensorParallel counts every sample once, not once per tp rank") {
  if (tp_sizes().empty()) return;  // one rank has no tensor parallelism; the np 2 and np 4 runs check it
  for (int tp : tp_sizes()) {
    INFO("tp_size ", tp, " of ", world()->size(), " ranks");
    AcceleratorOptions o = options();
    o.parallelism_config = ParallelismConfig{.tp_size = tp};
    Accelerator accelerator(o);
    std::vector<int64_t> ids(13);  // not a multiple of the replicas: the last batch is padded
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
    DataLoader loader(std::make_shared<TensorDataset>(std::vector<Tensor>{from_vector(ids)}), {.batch_size = 2});
    auto data = accelerator.prepare(loader);
    std::vector<int64_t> seen;
    for (const Batch& batch : data)
      for (int64_t id : accelerator.gather_for_metrics(batch[0]).to_vector<int64_t>()) seen.push_back(id);
    std::sort(seen.begin(), seen.end());
    CHECK(seen == ids);
  }
}

TEST_CASE("a TP=2 checkpoint resumes at TP=1 and at TP=4 and continues as the uninterrupted run") {
  const int world_size = world()->size();
  if (world_size < 2) return;  // TP=2 needs 2 ranks; the np 2 and np 4 runs check it
  const Run expected = reference_run(10);
  const std::string dir = shared_temp_dir() + "/tp2";
  const Run saved = accelerated_run({.tp_size = 2, .until = 5, .save_dir = dir});
  // Shards with global offsets, one file per tp rank, nothing gathered; put together they are the
  // full model the run held (merge-weights and a load at another tp read them so).
  if (world()->rank() == 0) {
    namespace fs = std::filesystem;
    CHECK(fs::exists(dir + "/model.shards.json"));
    CHECK(fs::exists(dir + "/model.shard-00001-of-00002.safetensors"));
    CHECK(fs::exists(dir + "/model.shard-00002-of-00002.safetensors"));
    CHECK(fs::exists(dir + "/optimizer.shard-00002-of-00002.safetensors"));
    CHECK_FALSE(fs::exists(dir + "/model.safetensors"));
    check_params(read_checkpoint_model(dir), saved.params);
    // A shard file left out of the index: the pieces no longer cover the split tensors.
    const std::string torn = dir + "_torn";
    fs::copy(dir, torn);
    {
      std::ofstream index(torn + "/model.shards.json");
      index << R"({"files": ["model.shard-00001-of-00002.safetensors"]})";
    }
    CHECK(error_of([&] { read_checkpoint_model(torn); })
              .find("the shard files hold 15 of the 30 rows of 'wte.weight' along dim 0") != std::string::npos);
  }
  std::vector<int> resume_at{1};
  if (world_size == 4) resume_at.push_back(4);
  for (int tp : resume_at) {
    INFO("resumed at tp_size ", tp, " on ", world_size, " ranks");
    const Run resumed = accelerated_run({.tp_size = tp, .from = 5, .until = 10, .load_dir = dir});
    check_close(resumed.losses, std::vector<double>(expected.losses.begin() + 5, expected.losses.end()), "losses");
    check_params(resumed.params, expected.params);
  }
}

int64_t count_of(const std::vector<std::string>& collectives, const std::string& prefix) {
  return std::count_if(collectives.begin(), collectives.end(),
                       [&](const std::string& c) { return c.rfind(prefix, 0) == 0; });
}

TEST_CASE("ZeRO 1, 2 and 3 over the dp ranks of a TP model equal one process, with 1/dp of the optimizer state") {
  if (tp_sizes().empty()) return;  // one rank has no tensor parallelism; the np 2 and np 4 runs check it
  const Run expected = reference_run(10);
  for (int tp : tp_sizes())
    for (int stage : {1, 2}) {
      const int dp = world()->size() / tp;
      INFO("zero_stage ", stage, " over dp ", dp, " x tp_size ", tp);
      const Run run = accelerated_run({.tp_size = tp, .zero_stage = stage});
      check_close(run.losses, expected.losses, "losses");
      check_close(run.norms, expected.norms, "grad norms");
      CHECK(run.norms[0] > kMaxNorm);  // the clip acted
      check_params(run.params, expected.params);
      // One flat unit (the parts fit one bucket), padded to a multiple of dp.
      CHECK(run.updated_numel == (run.local_numel + dp - 1) / dp);
      // Per step: one reduce-scatter of the unit's grads and one all-gather of its updated slices over
      // dp, no all-reduce of whole grads, and the norm's sums over the dp slices, then over tp.
      const auto& c = run.collectives;
      CHECK(count_of(c, "reduce_scatter at zero reduce-scatter of bucket0") == 10);
      CHECK(count_of(c, "all_gather at zero all-gather of bucket0") == 10);
      CHECK(count_of(c, "all_reduce at reducer") == 0);
      CHECK(count_of(c, "all_reduce at tensor parallel gradient norm over the zero slices") == (dp > 1 ? 10 : 0));
      CHECK(count_of(c, "all_reduce at tensor parallel gradient norm") == (dp > 1 ? 20 : 10));
    }
}

TEST_CASE("ZeRO 3 over the dp ranks of a TP model equals one process: its units, gathers and reduce-scatters counted") {
  if (tp_sizes().empty()) return;  // one rank has no tensor parallelism; the np 2 and np 4 runs check it
  const Run expected = reference_run(10);
  for (int tp : tp_sizes())
    for (const bool wrap : {false, true}) {
      const int dp = world()->size() / tp;
      INFO("zero_stage 3 over dp ", dp, " x tp_size ", tp,
           std::string(wrap ? ", FSDP, each ParallelGPTBlock a unit" : ", DeepSpeed's default units"));
      TpSpec spec{.tp_size = tp, .zero_stage = 3};
      if (wrap) spec.wrap = {"ParallelGPTBlock"};
      const Run run = accelerated_run(spec);
      check_close(run.losses, expected.losses, "losses");
      check_close(run.norms, expected.norms, "grad norms");
      check_params(run.params, expected.params);
      // The blocks and the root (wte, wpe, ln_f); or by default every module that owns parameters: 6 in
      // each block, wpe, ln_f, and the root with wte.weight, which the tied head reads itself.
      const int units = wrap ? 3 : 2 * 6 + 3;
      CHECK(run.updated_numel * dp >= run.local_numel);
      CHECK(run.updated_numel * dp < run.local_numel + units * dp);
      // Per step and unit one reduce-scatter; the root is gathered once (it stays whole from the
      // forward to the end of the backward), every other unit before its forward and again for its
      // backward.
      const auto& c = run.collectives;
      CHECK(count_of(c, "reduce_scatter at zero reduce-scatter of") == 10 * units);
      CHECK(count_of(c, "all_gather at zero all-gather unit") == 10 * (1 + 2 * (units - 1)));
      CHECK(count_of(c, "all_reduce at reducer") == 0);
    }
}

// tests/ddp/meson.build runs this case on 8 ranks too: 2 replicas x 2 shards x tp 2, a 3-D mesh.
TEST_CASE("HYBRID_SHARD over the dp ranks of a TP model equals one process: shard groups of dp ranks, replicated") {
  const int world_size = world()->size();
  if (world_size < 4) return;  // dp x tp needs 4 ranks; the np 4 and np 8 runs check it
  const int tp = 2, dp = world_size / tp;
  const Run expected = reference_run(10);
  for (int shard = 1; shard <= dp; ++shard) {
    if (dp % shard != 0) continue;
    const int replicas = dp / shard;
    INFO("hybrid_shard over dp_replicate=", replicas, " x dp_shard=", shard, " x tp_size ", tp);
    const Run run = accelerated_run({.tp_size = tp, .wrap = {"ParallelGPTBlock"}, .hybrid_shard_size = shard});
    check_close(run.losses, expected.losses, "losses");
    check_close(run.norms, expected.norms, "grad norms");
    CHECK(run.norms[0] > kMaxNorm);  // the clip acted
    check_params(run.params, expected.params);
    // The blocks and the root: a rank updates 1/shard of its tp parts, the replicas the same slices.
    const int units = 3;
    CHECK(run.updated_numel * shard >= run.local_numel);
    CHECK(run.updated_numel * shard < run.local_numel + units * shard);
    // Per step and unit one reduce-scatter over the shard group and one all-reduce of its slice over
    // the replicas; the norm adds the slices over the shard group only (the replicas hold the same).
    const auto& c = run.collectives;
    CHECK(count_of(c, "reduce_scatter at zero reduce-scatter of") == 10 * units);
    CHECK(count_of(c, "all_gather at zero all-gather unit") == 10 * (1 + 2 * (units - 1)));
    CHECK(count_of(c, "all_reduce at hybrid_shard all-reduce of") == (replicas > 1 ? 10 * units : 0));
    CHECK(count_of(c, "all_reduce at tensor parallel gradient norm over the zero slices") == (shard > 1 ? 10 : 0));
    CHECK(count_of(c, "all_reduce at reducer") == 0);
  }
}

TEST_CASE("ZeRO over the dp ranks of a TP model: accumulation equals one process, bf16 and fp16 train") {
  if (tp_sizes().empty()) return;  // one rank has no tensor parallelism; the np 2 and np 4 runs check it
  const Run windows = reference_run(5, 2 * kGlobalBatch);  // 5 windows of 2 micro-batches of 4
  for (int stage : {1, 2, 3}) {
    INFO("zero_stage ", stage, ", tp_size 2 of ", world()->size(), " ranks, 2 micro-batches per step");
    const Run run = accelerated_run({.tp_size = 2, .accumulation = 2, .zero_stage = stage});
    check_close(run.norms, windows.norms, "grad norms");
    check_params(run.params, windows.params);
    // Stages 1 and 2 send nothing on the early micro-step of a window; stage 3 reduce-scatters every
    // backward (its 15 units, see above), having no whole grads to keep.
    CHECK(count_of(run.collectives, "reduce_scatter at zero") == (stage == 3 ? 10 * 15 : 5));
  }
  const Run expected = reference_run(10);
  for (const auto& [precision, stage] : std::vector<std::pair<std::string, int>>{{"bf16", 2}, {"fp16", 2}, {"bf16", 3}}) {
    INFO(precision, ", zero_stage ", stage, ", tp_size 2 of ", world()->size(), " ranks");
    const Run run = accelerated_run({.tp_size = 2, .mixed_precision = precision, .zero_stage = stage});
    REQUIRE(run.losses.size() == expected.losses.size());
    for (size_t i = 0; i < run.losses.size(); ++i)
      CHECK(std::abs(run.losses[i] - expected.losses[i]) <= 1e-2 * expected.losses[i]);
    CHECK(run.losses.back() < run.losses.front());
    // The f32 masters exist only as the rank's slices.
    const int dp = world()->size() / 2;
    CHECK(run.updated_numel * dp >= run.local_numel);
    CHECK(run.updated_numel * dp < run.local_numel + 15 * dp);
  }
}

TEST_CASE("a TP=2 x ZeRO checkpoint resumes at TP=1, at TP=2 without ZeRO and under the other stages") {
  const int world_size = world()->size();
  if (world_size < 2) return;  // TP=2 needs 2 ranks; the np 2 and np 4 runs check it
  const Run expected = reference_run(10);
  for (int saved_stage : {1, 3}) {
  INFO("saved under zero_stage ", saved_stage);
  const std::string dir = shared_temp_dir() + fmt::format("/tp2_zero{}", saved_stage);
  const Run saved = accelerated_run({.tp_size = 2, .until = 5, .save_dir = dir, .zero_stage = saved_stage});
  // One shard file per rank, each its ZeRO slices of its parts as runs of the full tensors: nothing is
  // gathered over dp or tp.
  if (world()->rank() == 0) {
    check_shard_files(dir, world_size);
    check_one_piece_per_tensor(dir);
    check_params(read_checkpoint_model(dir), saved.params);
  }
  struct Resume {
    int tp, stage;
  };
  for (const Resume at : {Resume{1, 0}, Resume{2, 0}, Resume{2, 2}, Resume{2, 3}}) {
    INFO("resumed at tp_size ", at.tp, ", zero_stage ", at.stage, " on ", world_size, " ranks");
    const Run resumed = accelerated_run({.tp_size = at.tp, .from = 5, .until = 10, .load_dir = dir, .zero_stage = at.stage});
    check_close(resumed.losses, std::vector<double>(expected.losses.begin() + 5, expected.losses.end()), "losses");
    check_params(resumed.params, expected.params);
  }
  }
}

TEST_CASE("a rank of a TP=2 model, and under ZeRO 3 of its dp slices, reads only the elements it holds, and resumes "
          "with no gather") {
  const int world_size = world()->size();
  if (world_size < 2) return;  // TP=2 needs 2 ranks; the np 2 and np 4 runs check it
  for (int stage : {0, 3}) {
    INFO("zero_stage ", stage, ", tp_size 2 of ", world_size, " ranks");
    AcceleratorOptions o = options();
    o.parallelism_config = ParallelismConfig{.tp_size = 2};
    if (stage > 0) o.deepspeed_plugin = DeepSpeedPlugin{.zero_stage = stage, .gradient_accumulation_steps = std::nullopt};
    Accelerator accelerator(o);
    auto net = accelerator.prepare(make_gpt(31));
    // Another model's full state, loaded and gathered back exactly: every element read went to its place.
    const auto other_model = make_gpt(99);
    const nn::StateDict other = other_model->state_dict();
    const test_support::CountingStateReader full(other);
    accelerator.strategy().load_model_state(*net, full, true);
    check_params(accelerator.get_state_dict(*net), other);
    // What the rank read is what its own shard holds (its parts whole, or its ZeRO runs of them and of
    // the replicated tensors; 30 vocab rows and the 16-wide blocks divide by 2, so no padding), nothing more.
    int64_t held = 0, total = 0;
    const std::optional<StateShard> own = accelerator.strategy().model_state_shard(*net);
    REQUIRE(own);
    for (const auto& [name, t] : own->local) held += t.numel();
    for (const auto& [name, t] : other) total += t.numel();
    CHECK(full.elements == held);
    CHECK(full.elements < total * 3 / 4);
  }
  // load_state puts back from the rank's own shard should it fail, so it gathers nothing either.
  const Run expected = reference_run(10);
  const std::string dir = shared_temp_dir() + "/tp2_own_reads";
  accelerated_run({.tp_size = 2, .until = 5, .save_dir = dir, .zero_stage = 3});
  for (int stage : {0, 3}) {
    INFO("resumed at zero_stage ", stage);
    const Run resumed = accelerated_run({.tp_size = 2, .from = 5, .until = 10, .load_dir = dir, .zero_stage = stage});
    check_close(resumed.losses, std::vector<double>(expected.losses.begin() + 5, expected.losses.end()), "losses");
    check_params(resumed.params, expected.params);
    CHECK(count_of(resumed.load_collectives, "all_gather") == 0);
  }
}

std::vector<std::vector<float>> values_of(const nn::StateDict& state) {
  std::vector<std::vector<float>> out;
  for (const auto& [name, t] : state) out.push_back(nograd::contiguous(t).to_vector<float>());
  return out;
}

// A rank's peak host bytes above what it held before building the model under DeferredInit (or not)
// and preparing it, the bytes it holds at the end of prepare, and the parameters' broadcasts that
// prepare made.
struct Prepared {
  size_t peak_bytes = 0, held_bytes = 0;
  int64_t parameters = 0, parameter_broadcasts = 0;
  nn::StateDict state;  // gathered
};
Prepared prepare_gpt(const nn::GPTConfig& config, int stage, bool deferred_init) {
  AcceleratorOptions o = options();
  o.parallelism_config = ParallelismConfig{.tp_size = 2};
  if (stage > 0) o.deepspeed_plugin = DeepSpeedPlugin{.zero_stage = stage, .gradient_accumulation_steps = std::nullopt};
  Accelerator accelerator(o);
  world()->barrier();
  const size_t before = accelerator.memory_stats()[0].stats.allocated_bytes;
  accelerator.reset_peak_memory_stats();
  const LedgerMarks marks = mark_ledgers();
  Generator gen(31);
  std::shared_ptr<nn::GPT> model;
  {
    DeferredInit deferred(deferred_init);
    model = std::make_shared<nn::GPT>(config, gen);
  }
  const std::vector<std::string> names = [&] {
    std::vector<std::string> n;
    for (const auto& [name, p] : model->named_parameters()) n.push_back(name);
    return n;
  }();
  auto net = accelerator.prepare(model);
  Prepared out;
  out.parameters = static_cast<int64_t>(names.size());
  out.peak_bytes = accelerator.memory_stats()[0].stats.peak_allocated_bytes - before;
  out.held_bytes = accelerator.memory_stats()[0].stats.allocated_bytes - before;
  const std::vector<std::string> collectives = collectives_since(marks);
  for (const std::string& name : names)
    out.parameter_broadcasts += count_of(collectives, "broadcast at tensor parallel broadcast of " + name);
  out.state = accelerator.get_state_dict(*net);
  return out;
}

TEST_CASE("a GPT built under DeferredInit: each rank of TP=2, and of TP=2 x ZeRO 3, materialises only its parts, "
          "to the normal build's values bitwise") {
  const int world_size = world()->size();
  if (world_size < 2) return;  // TP=2 needs 2 ranks; the np 2 and np 4 runs check it
  // vocab 250 pads to 2 x 125: a padded vocab part; each block's q, k, v a fused split.
  const nn::GPTConfig config{.vocab_size = 250, .block_size = 16, .n_layer = 2, .n_head = 4, .n_embd = 64,
                             .tie_weights = true};
  Generator gen(31);
  const nn::StateDict reference = nn::GPT(config, gen).state_dict();
  int64_t full_bytes = 0;
  for (const auto& [name, t] : reference) full_bytes += t.numel() * static_cast<int64_t>(sizeof(float));
  for (int stage : {0, 3}) {
    INFO("zero_stage ", stage, ", tp_size 2 of ", world_size, " ranks");
    const Prepared normal = prepare_gpt(config, stage, false), deferred = prepare_gpt(config, stage, true);
    CHECK(values_of(deferred.state) == values_of(reference));
    CHECK(values_of(normal.state) == values_of(reference));
    // The normal build's parameters come from rank 0; the deferred ones from each rank's recipes.
    CHECK(normal.parameter_broadcasts == normal.parameters);
    CHECK(deferred.parameter_broadcasts == 0);
    // What prepare holds at its end is the same either way (the parts, under ZeRO 3 their dp slices, and
    // DDP's buckets); above it, the normal build held the full model before the split, and a deferred
    // one only what materialising one part at a time needs (a few times the largest part, here 32 KiB).
    INFO("peak ", deferred.peak_bytes, " bytes deferred, ", normal.peak_bytes, " normal; held after prepare ",
         deferred.held_bytes, " deferred, ", normal.held_bytes, " normal; the full model is ", full_bytes);
    CHECK(deferred.held_bytes == normal.held_bytes);
    CHECK(normal.peak_bytes >= static_cast<size_t>(full_bytes));
    CHECK(deferred.peak_bytes - deferred.held_bytes < static_cast<size_t>(full_bytes) / 3);
  }
}

// tests/ddp/meson.build runs this case on 8 ranks too (2 replicas x 2 shards x tp 2).
TEST_CASE("HYBRID_SHARD over the dp ranks of a TP model: its checkpoint resumes at another tp_size, under "
          "FULL_SHARD and under HYBRID_SHARD") {
  const int world_size = world()->size();
  if (world_size < 4) return;  // dp x tp needs 4 ranks; the np 4 and np 8 runs check it
  const int dp = world_size / 2, shard = std::max(1, dp / 2);
  const Run expected = reference_run(10);
  const std::string dir = shared_temp_dir() + "/tp2_hybrid";
  const TpSpec hybrid{.tp_size = 2, .wrap = {"ParallelGPTBlock"}, .hybrid_shard_size = shard};
  TpSpec save = hybrid;
  save.until = 5;
  save.save_dir = dir;
  const Run saved = accelerated_run(save);
  // One shard file per rank of the first replica: its slices of its parts, nothing gathered.
  if (world()->rank() == 0) {
    check_shard_files(dir, 2 * shard);
    check_params(read_checkpoint_model(dir), saved.params);
  }
  // At TP=1 on 4 ranks; on 8 the global batch of 4 does not split 8 ways, so at TP=4 (dp 2).
  TpSpec other_tp{.tp_size = world_size == 4 ? 1 : 4}, full_shard{.tp_size = 2, .zero_stage = 3}, again = hybrid;
  for (TpSpec* at : {&other_tp, &full_shard, &again}) {
    INFO("resumed at tp_size ", at->tp_size, ", zero_stage ", at->zero_stage, ", hybrid_shard_size ",
         at->hybrid_shard_size, " on ", world_size, " ranks");
    at->from = 5;
    at->load_dir = dir;
    const Run resumed = accelerated_run(*at);
    check_close(resumed.losses, std::vector<double>(expected.losses.begin() + 5, expected.losses.end()), "losses");
    check_params(resumed.params, expected.params);
  }
}

TEST_CASE("tp_size shows in the settings line, and bad sizes and models are refused naming the values") {
  const int world_size = world()->size();
  AcceleratorOptions o = options();
  o.parallelism_config = ParallelismConfig{.tp_size = 3};
  CHECK(error_of([&] { Accelerator accelerator(o); }) ==
        fmt::format("Accelerator: tp_size 3 (code) does not divide the world size {}", world_size));
  if (world_size < 2) return;
  o.parallelism_config = ParallelismConfig{.tp_size = 2, .dp_size = world_size};
  CHECK(error_of([&] { Accelerator accelerator(o); }) ==
        fmt::format("TensorParallel: dp_size {} x tp_size 2 is {}, but the world size is {}", world_size,
                    2 * world_size, world_size));
  o.parallelism_config = ParallelismConfig{.tp_size = 2};
  for (int stage : {1, 2, 3}) {
    o.deepspeed_plugin = DeepSpeedPlugin{.zero_stage = stage, .gradient_accumulation_steps = std::nullopt};
    CHECK(Accelerator(o).strategy().name() == fmt::format("tensor_parallel+zero_{}", stage));
  }
  o.deepspeed_plugin.reset();
  Accelerator accelerator(o);
  CHECK(accelerator.settings().describe().find(", tp_size=2 (code)") != std::string::npos);
  CHECK(accelerator.strategy().name() == "tensor_parallel");
  // A model that cannot split itself, and a GPT whose heads do not divide by tp.
  CHECK(error_of([&] { accelerator.prepare(make_mlp(1)); })
            .find("TensorParallel: a Sequential cannot split itself across a tensor-parallel group; tp_size 2") == 0);
  Generator gen(3);
  auto odd = std::make_shared<nn::GPT>(
      nn::GPTConfig{.vocab_size = 30, .block_size = 8, .n_layer = 1, .n_head = 3, .n_embd = 12}, gen);
  CHECK(error_of([&] { accelerator.prepare(odd); }) ==
        "GPT::parallelize: n_head 3 is not a multiple of the tensor-parallel size 2");
  // Stage 3 wraps the split model, whose blocks are ParallelGPTBlocks.
  {
    AcceleratorOptions fsdp = o;
    fsdp.fsdp_plugin = FSDPPlugin{.sharding_strategy = ShardingStrategy::full_shard, .auto_wrap = {.module_types = {"GPTBlock"}}};
    Accelerator sharded(fsdp);
    const std::string error = error_of([&] { sharded.prepare(make_gpt(5)); });
    CHECK(error.find("auto_wrap: FSDPPlugin auto_wrap.module_types names 'GPTBlock', which matches no module of this "
                     "GPT (its module types: ") == 0);
    CHECK(error.find("ParallelGPTBlock") != std::string::npos);
  }
  // A checkpoint's tensor of another model's size.
  auto model = make_gpt(5);
  auto net = accelerator.prepare(model);
  nn::StateDict state = accelerator.get_state_dict(*net);
  state[0].second = zeros({31, 16});
  CHECK(error_of([&] { accelerator.strategy().load_model_state_dict(*net, state, true); }) ==
        "TensorParallel::load_model_state: 'wte.weight' in the state is [31, 16], but the model's full tensor "
        "is [30, 16]");
}

TEST_CASE("a tensor-parallel layer under a strategy that keeps layers whole is refused") {
  Accelerator accelerator(options());
  Generator gen(4);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(nn::parallel::ColumnParallelLinear::from_full(nn::Linear(4, 4, true, gen), *world()));
  CHECK(error_of([&] { accelerator.prepare(model); }) ==
        fmt::format("Accelerator::prepare: the model's '0' is a tensor-parallel layer, but the strategy is {}, which "
                    "keeps every layer whole; set tp_size (ParallelismConfig, --tp_size) and give prepare the whole "
                    "model",
                    accelerator.strategy().name()));
}

}  // namespace test
