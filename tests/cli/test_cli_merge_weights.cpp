// accel merge-weights CHECKPOINT OUT_DIR: a checkpoint whose model was split into size shards comes
// out as one model.safetensors equal to the model's state, for the first model and a later one; an
// unfinished or missing checkpoint is refused by name. Every command runs under `timeout`.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "accel.h"
#include "cli_run.h"

using namespace cli_test;
namespace fs = std::filesystem;

namespace {

bool same_state(const accel::nn::StateDict& a, const accel::nn::StateDict& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    auto it = std::find_if(b.begin(), b.end(), [&](const auto& e) { return e.first == name; });
    if (it == b.end() || it->second.shape() != t.shape() || it->second.to_vector<float>() != t.to_vector<float>())
      return false;
  }
  return true;
}

}  // namespace

TEST_CASE("accel merge-weights writes a sharded checkpoint's model as one file, unchanged") {
  const TempDir dir("merge-weights");
  const std::string checkpoint = (dir.path / "checkpoint").string();
  accel::nn::StateDict first, second;
  {
    accel::AcceleratorOptions o;
    o.print_settings = false;
    accel::Accelerator accelerator(o);
    accel::Generator gen(4);
    auto a = std::make_shared<accel::nn::Linear>(64, 32, true, gen);
    auto b = std::make_shared<accel::nn::Linear>(8, 4, true, gen);
    accelerator.prepare(a);
    accelerator.prepare(b);
    accelerator.save_state(checkpoint, {.async = false, .max_shard_bytes = 4096});  // the 8 KiB weight alone
    first = a->state_dict();
    second = b->state_dict();
  }
  REQUIRE(fs::exists(fs::path(checkpoint) / "model.safetensors.index.json"));
  REQUIRE_FALSE(fs::exists(fs::path(checkpoint) / "model.safetensors"));
  const std::string out = (dir.path / "merged").string();
  Run r = run(fmt::format("{} merge-weights {} {}", kAccel, checkpoint, out));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, fmt::format("wrote {}/model.safetensors (2 tensors, {} bytes of data)", out, (64 * 32 + 32) * 4)));
  CHECK(same_state(accel::load_safetensors(out + "/model.safetensors").tensors, first));
  r = run(fmt::format("{} merge-weights {} {} --model 1", kAccel, checkpoint, out + "1"));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(same_state(accel::load_safetensors(out + "1/model.safetensors").tensors, second));

  r = run(fmt::format("{} merge-weights {} {} --model 2", kAccel, checkpoint, out + "2"));
  CHECK(r.status != 0);
  CHECK(contains(r.output, "model_2.safetensors"));
  fs::remove(fs::path(checkpoint) / "COMPLETE");
  r = run(fmt::format("{} merge-weights {} {}", kAccel, checkpoint, out));
  CHECK(r.status != 0);
  CHECK(contains(r.output, "has no COMPLETE marker; its save did not finish"));
  r = run(fmt::format("{} merge-weights {} {}", kAccel, (dir.path / "nothing").string(), out));
  CHECK(r.status != 0);
  CHECK(contains(r.output, "is not a directory; expected a save_state checkpoint"));
}
