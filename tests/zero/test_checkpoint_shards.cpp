// ZeRO checkpoints as per-rank shards: under each stage, save_state has every rank write only the
// runs of the parameters and of AdamW's moments that its flat slices hold (the element counts of
// each file checked against the unit layout), with no collective but the save's barriers; the files
// put together equal get_state_dict bitwise (what merge-weights writes); and a missing shard file, a
// piece that does not fit, a repeated file or one left out of the index is refused naming the file.
// The resume on 1, 2 and 4 ranks is zero_resume.sh's.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/checkpoint/training_checkpoint.h"
#include "zero_support.h"

namespace test {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Trained {
  std::unique_ptr<Accelerator> accelerator;
  std::shared_ptr<nn::Sequential> model;
  std::shared_ptr<optim::Optimizer> optimizer;
};

// A few AdamW steps of the odd MLP under ZeRO stage `stage`, over units of at most 64 floats.
Trained train_steps(int stage, int steps) {
  AcceleratorOptions o = options();
  o.split_batches = true;
  o.bucket_cap_mb = 256.0 / (1 << 20);
  o.deepspeed_plugin = DeepSpeedPlugin{.zero_stage = stage, .gradient_accumulation_steps = std::nullopt};
  Trained t{std::make_unique<Accelerator>(o), make_odd_mlp(5), nullptr};
  t.optimizer = make_optimizer("adamw", t.model->parameters());
  DataLoader loader(odd_data(8 * steps), {.batch_size = 8, .shuffle = true, .seed = 3});
  auto [net, opt, data] = t.accelerator->prepare(t.model, t.optimizer, loader);
  for (const Batch& batch : data) {
    opt->zero_grad();
    t.accelerator->backward(nn::mse_loss((*net)(batch[0]), batch[1]));
    opt->step();
  }
  return t;
}

// The parameters' elements this rank's slices hold, from the unit layout alone: the parameters fill
// [0, numel) of each flat buffer, rank r owns [r S, (r + 1) S), the rest is padding.
int64_t elements_held(const Accelerator& accelerator, const nn::Module& model) {
  const auto& zero = dynamic_cast<const ZeroStrategy&>(accelerator.strategy());
  int64_t held = 0;
  for (const FlatUnit* unit : zero.units_of(model))
    held += std::clamp<int64_t>(unit->numel() - unit->shard_offset(), 0, unit->shard_numel());
  return held;
}

// The elements of a file's tensors whose key contains `part` (every tensor for "").
int64_t elements_in(const SafetensorsContents& file, const std::string& part) {
  int64_t n = 0;
  for (const auto& [key, t] : file.tensors)
    if (key.find(part) != std::string::npos) n += t.numel();
  return n;
}

void check_same_state(const nn::StateDict& got, const nn::StateDict& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO(want[i].first);
    CHECK(got[i].first == want[i].first);
    CHECK(got[i].second.shape() == want[i].second.shape());
    CHECK(contiguous(got[i].second).to_vector<float>() == contiguous(want[i].second).to_vector<float>());
  }
}

std::string shard_file(const std::string& stem, int rank, int parts) {
  return fmt::format("{}.shard-{:05d}-of-{:05d}.safetensors", stem, rank + 1, parts);
}

}  // namespace

TEST_CASE("each ZeRO stage saves per-rank shards: a rank's files hold its slices only, nothing is gathered") {
  const int n = world()->size(), rank = world()->rank();
  for (const int stage : {1, 2, 3}) {
    INFO("stage ", stage, ", rank ", rank, " of ", n);
    const std::string dir = shared_temp_dir() + "/ckpt";
    Trained t = train_steps(stage, 3);
    const LedgerMarks marks = mark_ledgers();
    t.accelerator->save_state(dir);
    // No all-gather, gather, broadcast or reduction: the save's barriers only.
    const std::vector<std::string> ran = collectives_since(marks);
    int barriers = 0;
    for (const std::string& c : ran) {
      INFO(c);
      CHECK(c.rfind("barrier", 0) == 0);
      barriers += c.rfind("barrier", 0) == 0;
    }
    CHECK(barriers > 0);  // the ledgers saw the save

    CHECK(fs::exists(dir + "/model.shards.json"));
    CHECK_FALSE(fs::exists(dir + "/model.safetensors"));
    CHECK_FALSE(fs::exists(dir + "/optimizer.safetensors"));
    const int64_t held = elements_held(*t.accelerator, *t.model);
    const SafetensorsContents model_file = load_safetensors(dir + "/" + shard_file("model", rank, n));
    CHECK(elements_in(model_file, "") == held);  // the MLP has no buffers: pieces only
    for (const auto& [key, tensor] : model_file.tensors) CHECK(key.find('@') != std::string::npos);
    CHECK(json::parse(model_file.metadata.at("accel_pieces")).dump().find("element_offset") != std::string::npos);
    const SafetensorsContents optimizer_file = load_safetensors(dir + "/" + shard_file("optimizer", rank, n));
    CHECK(elements_in(optimizer_file, ".exp_avg@") == held);
    CHECK(elements_in(optimizer_file, ".exp_avg_sq@") == held);
    CHECK(elements_in(optimizer_file, ".step") == (rank == 0 ? 6 : 0));  // counts are whole, in part 0
    // Every rank's slices together are the model, once: 91 + 13 + 65 + 5 + 15 + 3 elements.
    double total = 0;
    for (double h : all_ranks(static_cast<double>(held))) total += h;
    CHECK(total == 192);
    if (n > 1) CHECK(held < 192);

    // Put together, the shards are the model the run holds (merge-weights writes this state).
    check_same_state(read_checkpoint_model(dir), t.accelerator->get_state_dict(*t.model));
    world()->barrier();
    if (rank == 0) fs::remove_all(fs::path(dir).parent_path());
  }
}

TEST_CASE("a ZeRO checkpoint with a shard file missing, left out, repeated or with a piece that does not fit is "
          "refused naming the file") {
  const int n = world()->size();
  const std::string root = shared_temp_dir();
  Trained t = train_steps(2, 3);
  t.accelerator->save_state(root + "/ckpt");
  const std::string last = shard_file("model", n - 1, n);
  std::vector<std::string> files;
  for (int r = 0; r < n; ++r) files.push_back(shard_file("model", r, n));
  if (world()->rank() == 0) {
    for (const char* name : {"missing", "misfit", "left_out", "repeated"}) fs::copy(root + "/ckpt", root + "/" + name);
    fs::remove(root + "/missing/" + last);
    // The last rank's first piece moved one element past the end of its full tensor.
    SafetensorsContents contents = load_safetensors(root + "/misfit/" + last);
    json pieces = json::parse(contents.metadata.at("accel_pieces"));
    json& piece = pieces.begin().value();
    int64_t full = 1;
    for (int64_t d : piece.at("full_shape").get<std::vector<int64_t>>()) full *= d;
    piece["element_offset"] = full - contents.at(pieces.begin().key()).numel() + 1;
    contents.metadata["accel_pieces"] = pieces.dump();
    save_safetensors(root + "/misfit/" + last, contents.tensors, contents.metadata);
    std::ofstream(root + "/left_out/model.shards.json") << json{{"files", std::vector<std::string>(files.begin(), files.end() - 1)}}.dump();
    std::vector<std::string> twice = files;
    twice.push_back(files.back());
    std::ofstream(root + "/repeated/model.shards.json") << json{{"files", twice}}.dump();
  }
  world()->barrier();
  const std::vector<double> before = weights_of(*t.model);
  std::string error = error_of([&] { t.accelerator->load_state(root + "/missing"); });
  CHECK_MESSAGE(error.find(root + "/missing/" + last) != std::string::npos, error);
  error = error_of([&] { t.accelerator->load_state(root + "/misfit"); });
  CHECK_MESSAGE(error.find(root + "/misfit/" + last) != std::string::npos, error);
  CHECK_MESSAGE(error.find("does not fit its full tensor") != std::string::npos, error);
  if (n > 1) {  // with one part, leaving it out leaves no file at all
    error = error_of([&] { t.accelerator->load_state(root + "/left_out"); });
    CHECK_MESSAGE(error.find(root + "/left_out/model.shards.json") != std::string::npos, error);
    CHECK_MESSAGE(error.find("a shard file is missing") != std::string::npos, error);
  }
  error = error_of([&] { t.accelerator->load_state(root + "/repeated"); });
  CHECK_MESSAGE(error.find(root + "/repeated/" + last) != std::string::npos, error);
  CHECK_MESSAGE(error.find("overlaps another piece") != std::string::npos, error);
  CHECK(weights_of(*t.model) == before);  // nothing was applied
  CHECK(error_of([&] { t.accelerator->load_state(root + "/ckpt"); }) == "no error");
  world()->barrier();
  if (world()->rank() == 0) fs::remove_all(root);
}

}  // namespace test
