// parse_checkpoint_state and parse_shard_index: a checkpoint's JSON files read from text, each bad
// field refused with an accel::Error that names the file and the field (found while fuzzing them).
#include <doctest/doctest.h>

#include <string>

#include "kernels/error.h"
#include "runtime/checkpoint/checkpoint_state.h"

using namespace accel;

namespace {

const std::string kGood = R"({"format": 1, "world_size": 2, "models": 1, "optimizers": 1, "objects": 0,
  "generators": 0, "loaders": [{"epoch": 3, "samples_seen": 64, "global_batch_size": 16}], "completed_steps": 4,
  "accumulation": {"steps": 1, "micro_step": 0, "batches_seen": 4, "batches": 5}})";

std::string refusal(const std::string& text) {
  try {
    parse_checkpoint_state(text, "s.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

std::string with(const std::string& from, const std::string& to) {
  std::string s = kGood;
  s.replace(s.find(from), from.size(), to);
  return s;
}

}  // namespace

TEST_CASE("parse_checkpoint_state reads every field of accelerator_state.json") {
  const SavedCheckpointState s = parse_checkpoint_state(kGood, "s.json");
  CHECK(s.format == 1);
  CHECK(s.world_size == 2);
  CHECK(s.models == 1);
  CHECK(s.optimizers == 1);
  REQUIRE(s.loaders.size() == 1);
  CHECK(s.loaders[0].epoch == 3);
  CHECK(s.loaders[0].samples_seen == 64);
  CHECK(s.completed_steps == 4);
  CHECK(s.batches_seen == 4);
  CHECK(s.batches == 5);
}

TEST_CASE("parse_checkpoint_state refuses a world size below 1, which the loader divides by") {
  CHECK(refusal(with("\"world_size\": 2", "\"world_size\": 0")) ==
        "load_state: s.json: 'world_size' is 0, expected an integer from 1 to 2147483647");
  CHECK(refusal(with("\"world_size\": 2", "\"world_size\": -4")).find("'world_size' is -4") != std::string::npos);
}

TEST_CASE("parse_checkpoint_state names the field of a wrong type or range, and text that is not JSON") {
  CHECK(refusal(with("\"epoch\": 3", "\"epoch\": \"3\"")) ==
        "load_state: s.json: 'epoch' is \"3\", expected an integer from 0 to 9223372036854775807");
  CHECK(refusal(with("\"samples_seen\": 64", "\"samples_seen\": -64")).find("'samples_seen' is -64") != std::string::npos);
  CHECK(refusal(with("\"models\": 1", "\"models\": 1.5")).find("'models' is 1.5") != std::string::npos);
  CHECK(refusal(with("\"completed_steps\": 4", "\"completed_steps\": 1e300")).find("'completed_steps'") !=
        std::string::npos);
  CHECK(refusal(with("\"loaders\": [", "\"loaders\": 7, \"x\": [")) ==
        "load_state: s.json: 'loaders' is number, expected an array");
  CHECK(refusal(with("\"micro_step\": 0, ", "")) == "load_state: s.json: 'micro_step' is missing");
  CHECK(refusal("[1, 2]") == "load_state: s.json: expected a JSON object, got array");
  CHECK(refusal("{\"format\": 1,").rfind("load_state: s.json: not JSON: ", 0) == 0);
  CHECK(refusal(with("\"format\": 1", "\"format\": 99")).find("format 99 is not one this accel") != std::string::npos);
}

TEST_CASE("parse_shard_index lists each shard once and refuses a file outside the checkpoint directory") {
  const std::string index = R"({"metadata": {"total_size": 8}, "weight_map": {"a": "m-1.safetensors",
    "b": "m-2.safetensors", "c": "m-1.safetensors"}})";
  CHECK(parse_shard_index(index, "i.json") == std::vector<std::string>{"m-1.safetensors", "m-2.safetensors"});
  CHECK_THROWS_WITH_AS(parse_shard_index(R"({"weight_map": {"w": "../../etc/passwd"}})", "i.json"),
                       "load_state: i.json: weight_map['w'] is '../../etc/passwd', expected a file name in the "
                       "checkpoint directory (no '/')",
                       Error);
  CHECK_THROWS_WITH_AS(parse_shard_index(R"({"weight_map": {"w": 3}})", "i.json"),
                       "load_state: i.json: weight_map['w'] is 3, expected a file name", Error);
  CHECK_THROWS_WITH_AS(parse_shard_index(R"({"metadata": {}})", "i.json"), "load_state: i.json: 'weight_map' is missing",
                       Error);
}
