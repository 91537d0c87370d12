// The ZeRO / FSDP settings: DeepSpeedPlugin and FSDPPlugin in code, ACCEL_ZERO_STAGE and
// ACCEL_FSDP_SHARDING_STRATEGY from `accel launch`, and the errors that name both settings.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "accel.h"
#include "runtime/config_file.h"

using namespace accel;

namespace {

AcceleratorOptions quiet() {
  AcceleratorOptions o;
  o.print_settings = false;
  o.config_file = std::nullopt;
  return o;
}

const std::map<std::string, std::string> kNoEnv{{"ACCEL_CONFIG_FILE", "/nonexistent/accel-tests.yaml"}};

std::map<std::string, std::string> with_env(std::map<std::string, std::string> vars) {
  vars.emplace("ACCEL_CONFIG_FILE", "/nonexistent/accel-tests.yaml");
  return vars;
}

}  // namespace

TEST_CASE("sharding strategies keep fixed values and map to ZeRO stages") {
  CHECK(static_cast<int>(ShardingStrategy::full_shard) == 0);
  CHECK(static_cast<int>(ShardingStrategy::shard_grad_op) == 1);
  CHECK(static_cast<int>(ShardingStrategy::no_shard) == 2);
  CHECK(static_cast<int>(ShardingStrategy::hybrid_shard) == 3);
  for (size_t i = 0; i < kShardingStrategyNames.size(); ++i)
    CHECK(static_cast<size_t>(kShardingStrategyNames[i].value) == i);
  CHECK(zero_stage_of(ShardingStrategy::full_shard) == 3);
  CHECK(zero_stage_of(ShardingStrategy::shard_grad_op) == 2);
  CHECK(zero_stage_of(ShardingStrategy::no_shard) == 0);
}

TEST_CASE("the ZeRO stage comes from a plugin in code, else the environment, else 0") {
  AcceleratorOptions o = quiet();
  EffectiveSettings s = resolve_settings(o, kNoEnv);
  CHECK(s.zero_stage.value == 0);
  CHECK(s.zero_stage.source == "default");
  CHECK(s.describe().find("zero_stage") == std::string::npos);

  o.deepspeed_plugin = DeepSpeedPlugin{.zero_stage = 2, .gradient_accumulation_steps = 2};
  o.mixed_precision = "fp16";
  s = resolve_settings(o, kNoEnv);
  CHECK(s.zero_stage.value == 2);
  CHECK(s.sharding_via == "deepspeed");
  CHECK(s.gradient_accumulation_steps.value == 2);
  CHECK(s.gradient_accumulation_steps.source == "code");
  CHECK(s.describe().find(", zero_stage=2 (code)") != std::string::npos);

  AcceleratorOptions f = quiet();
  f.fsdp_plugin = FSDPPlugin{.sharding_strategy = ShardingStrategy::full_shard,
                             .auto_wrap = {.module_types = {"GPTBlock"}},
                             .reshard_after_forward = false};
  s = resolve_settings(f, kNoEnv);
  CHECK(s.zero_stage.value == 3);
  CHECK(s.zero_stage.source == "code, sharding_strategy FULL_SHARD");
  CHECK(s.auto_wrap.value.module_types == std::vector<std::string>{"GPTBlock"});
  CHECK(s.describe().find(", zero_stage=3 (code, sharding_strategy FULL_SHARD), auto_wrap=GPTBlock (code)") !=
        std::string::npos);
  CHECK_FALSE(s.reshard_after_forward.value);

  s = resolve_settings(quiet(), with_env({{"ACCEL_ZERO_STAGE", "1"}}));
  CHECK(s.zero_stage.value == 1);
  CHECK(s.zero_stage.source == "environment ACCEL_ZERO_STAGE");
  s = resolve_settings(quiet(), with_env({{"ACCEL_FSDP_SHARDING_STRATEGY", "SHARD_GRAD_OP"}}));
  CHECK(s.zero_stage.value == 2);
  CHECK(s.sharding_via == "fsdp");
}

TEST_CASE("bad sharding configurations name both settings") {
  AcceleratorOptions o = quiet();
  o.deepspeed_plugin = DeepSpeedPlugin{.zero_stage = 4, .gradient_accumulation_steps = std::nullopt};
  CHECK_THROWS_WITH_AS(resolve_settings(o, kNoEnv),
                       "Accelerator: zero_stage '4' from code is not valid; expected 0, 1, 2 or 3", Error);
  o.deepspeed_plugin->zero_stage = 2;
  o.fsdp_plugin = FSDPPlugin{};
  CHECK_THROWS_WITH_AS(resolve_settings(o, kNoEnv),
                       "Accelerator: deepspeed_plugin (zero_stage 2) and fsdp_plugin (sharding_strategy FULL_SHARD) "
                       "were both given; give one of them",
                       Error);
  o.fsdp_plugin.reset();
  o.deepspeed_plugin->gradient_accumulation_steps = 2;
  o.gradient_accumulation_steps = 4;
  CHECK_THROWS_WITH_AS(resolve_settings(o, kNoEnv),
                       "Accelerator: gradient_accumulation_steps 4 and DeepSpeedPlugin's gradient_accumulation_steps "
                       "2 differ; give one of them",
                       Error);
  CHECK_THROWS_WITH_AS(
      resolve_settings(quiet(), with_env({{"ACCEL_ZERO_STAGE", "2"}, {"ACCEL_FSDP_SHARDING_STRATEGY", "FULL_SHARD"}})),
                       "Accelerator: ACCEL_ZERO_STAGE=2 and ACCEL_FSDP_SHARDING_STRATEGY=FULL_SHARD were both set; set "
                       "one of them (--use_deepspeed or --use_fsdp)",
                       Error);
  CHECK_THROWS_WITH_AS(resolve_settings(quiet(), with_env({{"ACCEL_FSDP_SHARDING_STRATEGY", "FULL"}})),
                       "Accelerator: fsdp_sharding_strategy 'FULL' from environment ACCEL_FSDP_SHARDING_STRATEGY is not "
                       "valid; expected FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD or HYBRID_SHARD_ZERO2",
                       Error);
}

TEST_CASE("HYBRID_SHARD is stage 3 over a mesh; its hybrid_shard_size comes from code, the environment or the "
          "config file, and shows in the start-up line") {
  AcceleratorOptions o = quiet();
  o.fsdp_plugin = FSDPPlugin{.sharding_strategy = ShardingStrategy::hybrid_shard};
  EffectiveSettings s = resolve_settings(o, kNoEnv);
  CHECK(s.zero_stage.value == 3);
  CHECK(s.hybrid_shard);
  CHECK(s.hybrid_shard_size.value == 0);  // one node's ranks
  CHECK(s.hybrid_shard_size.source == "default");
  CHECK(s.describe().find(", zero_stage=3 (code, sharding_strategy HYBRID_SHARD), hybrid_shard_size=node (default)") !=
        std::string::npos);
  o.fsdp_plugin->hybrid_shard_size = 2;
  s = resolve_settings(o, kNoEnv);
  CHECK(s.hybrid_shard_size.value == 2);
  CHECK(s.describe().find(", hybrid_shard_size=2 (code)") != std::string::npos);
  s = resolve_settings(quiet(), with_env({{"ACCEL_FSDP_SHARDING_STRATEGY", "HYBRID_SHARD"},
                                          {"ACCEL_FSDP_HYBRID_SHARD_SIZE", "4"}}));
  CHECK(s.hybrid_shard);
  CHECK(s.hybrid_shard_size.value == 4);
  CHECK(s.hybrid_shard_size.source == "environment ACCEL_FSDP_HYBRID_SHARD_SIZE");
  // Plain stage 3 does not mention it.
  o.fsdp_plugin = FSDPPlugin{};
  CHECK(resolve_settings(o, kNoEnv).describe().find("hybrid_shard_size") == std::string::npos);

  const std::string path = (std::filesystem::temp_directory_path() / "accel_test_hybrid_config.yaml").string();
  {
    std::ofstream out(path);
    out << "fsdp_sharding_strategy: HYBRID_SHARD\nfsdp_hybrid_shard_size: 2\nnum_processes: 4\n";
  }
  AcceleratorOptions f = quiet();
  f.config_file = path;
  s = resolve_settings(f, kNoEnv);
  CHECK(s.hybrid_shard);
  CHECK(s.hybrid_shard_size.value == 2);
  CHECK(s.hybrid_shard_size.source == "config file");
  const ConfigFile c = load_config(path);
  CHECK(c.fsdp_hybrid_shard_size == 2);
  CHECK(parse_config(to_yaml(c), "round trip") == c);
  std::filesystem::remove(path);
}

TEST_CASE("HYBRID_SHARD_ZERO2 is HYBRID_SHARD whose units stay gathered from forward to backward") {
  AcceleratorOptions o = quiet();
  o.fsdp_plugin = FSDPPlugin{.sharding_strategy = ShardingStrategy::hybrid_shard_zero2, .hybrid_shard_size = 2};
  EffectiveSettings s = resolve_settings(o, kNoEnv);
  CHECK(s.zero_stage.value == 3);
  CHECK(s.hybrid_shard);
  CHECK_FALSE(s.reshard_after_forward.value);  // whatever the plugin's reshard_after_forward says
  CHECK(s.hybrid_shard_size.value == 2);
  CHECK(s.describe().find("sharding_strategy HYBRID_SHARD_ZERO2") != std::string::npos);
  s = resolve_settings(quiet(), with_env({{"FSDP_SHARDING_STRATEGY", "5"}, {"ACCELERATE_USE_FSDP", "True"},
                                          {"ACCEL_FSDP_HYBRID_SHARD_SIZE", "2"}}));
  CHECK(s.hybrid_shard);
  CHECK_FALSE(s.reshard_after_forward.value);
  const ConfigFile c = parse_config("fsdp_sharding_strategy: HYBRID_SHARD_ZERO2\nfsdp_hybrid_shard_size: 2\nnum_processes: 4\n",
                                    "test.yaml");
  CHECK(c.fsdp_hybrid_shard_size == 2);
  o.fsdp_plugin = FSDPPlugin{.sharding_strategy = ShardingStrategy::hybrid_shard};
  CHECK(resolve_settings(o, kNoEnv).reshard_after_forward.value);  // plain HYBRID_SHARD keeps the plugin's default
}

TEST_CASE("a hybrid_shard_size for another strategy, or a bad one, names both settings") {
  AcceleratorOptions o = quiet();
  o.fsdp_plugin = FSDPPlugin{.sharding_strategy = ShardingStrategy::full_shard, .hybrid_shard_size = 2};
  CHECK_THROWS_WITH_AS(resolve_settings(o, kNoEnv),
                       "Accelerator: hybrid_shard_size 2 (code) is for sharding_strategy HYBRID_SHARD, but the sharding "
                       "is zero_stage 3 (code, sharding_strategy FULL_SHARD); give sharding_strategy HYBRID_SHARD or "
                       "leave hybrid_shard_size out",
                       Error);
  CHECK_THROWS_WITH_AS(resolve_settings(quiet(), with_env({{"ACCEL_FSDP_HYBRID_SHARD_SIZE", "2"}})),
                       "Accelerator: hybrid_shard_size 2 (environment ACCEL_FSDP_HYBRID_SHARD_SIZE) is for "
                       "sharding_strategy HYBRID_SHARD, but the sharding is zero_stage 0 (default); give "
                       "sharding_strategy HYBRID_SHARD or leave hybrid_shard_size out",
                       Error);
  o.fsdp_plugin = FSDPPlugin{.sharding_strategy = ShardingStrategy::hybrid_shard, .hybrid_shard_size = -1};
  CHECK_THROWS_WITH_AS(resolve_settings(o, kNoEnv),
                       "Accelerator: hybrid_shard_size '-1' from code is not valid; expected an integer >= 0 (ranks "
                       "per HYBRID_SHARD shard group; 0: the ranks of one node)",
                       Error);
  CHECK_THROWS_WITH_AS(parse_config("fsdp_sharding_strategy: FULL_SHARD\nfsdp_hybrid_shard_size: 2\n", "test.yaml"),
                       "test.yaml: fsdp_hybrid_shard_size 2 is for fsdp_sharding_strategy HYBRID_SHARD (or "
                       "HYBRID_SHARD_ZERO2), but that is 'FULL_SHARD'",
                       Error);
  CHECK_THROWS_WITH_AS(
      parse_config("fsdp_sharding_strategy: HYBRID_SHARD\nfsdp_hybrid_shard_size: 3\nnum_processes: 4\n", "test.yaml"),
      "test.yaml: fsdp_hybrid_shard_size 3 does not divide num_processes 4", Error);
  // Under tensor parallelism a shard group is made of dp ranks: 4 does not divide 8 over tp_size 4.
  CHECK(parse_config("fsdp_sharding_strategy: HYBRID_SHARD\nfsdp_hybrid_shard_size: 2\nnum_processes: 8\ntp_size: 2\n",
                     "test.yaml")
            .fsdp_hybrid_shard_size == 2);
  CHECK_THROWS_WITH_AS(
      parse_config("fsdp_sharding_strategy: HYBRID_SHARD\nfsdp_hybrid_shard_size: 4\nnum_processes: 8\ntp_size: 4\n",
                   "test.yaml"),
      "test.yaml: fsdp_hybrid_shard_size 4 does not divide num_processes 8 over tp_size 4 (2)", Error);
}

TEST_CASE("stage 3's units from FSDPPlugin in code, else ACCEL_FSDP_TRANSFORMER_CLS_TO_WRAP and "
          "ACCEL_FSDP_MIN_NUM_PARAMS (or Accelerate's names), else the config file") {
  EffectiveSettings s = resolve_settings(quiet(), with_env({{"ACCEL_FSDP_SHARDING_STRATEGY", "FULL_SHARD"}}));
  CHECK(s.auto_wrap.value.is_default());
  CHECK(s.auto_wrap.source == "default");
  CHECK(s.describe().find("auto_wrap") == std::string::npos);

  s = resolve_settings(quiet(), with_env({{"ACCEL_FSDP_SHARDING_STRATEGY", "FULL_SHARD"},
                                          {"ACCEL_FSDP_TRANSFORMER_CLS_TO_WRAP", "GPTBlock, MLP"},
                                          {"ACCEL_FSDP_MIN_NUM_PARAMS", "1000"}}));
  CHECK(s.auto_wrap.value.module_types == std::vector<std::string>{"GPTBlock", "MLP"});
  CHECK(s.auto_wrap.value.min_num_params == 1000);
  CHECK(s.describe().find(", auto_wrap=GPTBlock, MLP, min_num_params 1000 (environment "
                          "ACCEL_FSDP_TRANSFORMER_CLS_TO_WRAP, environment ACCEL_FSDP_MIN_NUM_PARAMS)") != std::string::npos);
  // Accelerate's names, read as FSDP_SHARDING_STRATEGY is: under ACCELERATE_USE_FSDP.
  s = resolve_settings(quiet(), with_env({{"ACCELERATE_USE_FSDP", "true"}, {"FSDP_SHARDING_STRATEGY", "1"},
                                          {"FSDP_TRANSFORMER_CLS_TO_WRAP", "GPTBlock"}}));
  CHECK(s.auto_wrap.value.module_types == std::vector<std::string>{"GPTBlock"});
  CHECK(s.auto_wrap.source == "environment FSDP_TRANSFORMER_CLS_TO_WRAP");
  // DeepSpeed's stage 3 takes them too.
  s = resolve_settings(quiet(), with_env({{"ACCEL_ZERO_STAGE", "3"}, {"ACCEL_FSDP_MIN_NUM_PARAMS", "50"}}));
  CHECK(s.auto_wrap.value.min_num_params == 50);
  // The plugin in code brings its own units, the environment's notwithstanding.
  AcceleratorOptions o = quiet();
  o.fsdp_plugin = FSDPPlugin{};
  s = resolve_settings(o, with_env({{"ACCEL_FSDP_TRANSFORMER_CLS_TO_WRAP", "GPTBlock"}}));
  CHECK(s.auto_wrap.value.is_default());
  CHECK(s.auto_wrap.source == "code");

  CHECK_THROWS_WITH_AS(resolve_settings(quiet(), with_env({{"ACCEL_FSDP_SHARDING_STRATEGY", "SHARD_GRAD_OP"},
                                                            {"ACCEL_FSDP_TRANSFORMER_CLS_TO_WRAP", "GPTBlock"}})),
                       "Accelerator: auto_wrap GPTBlock (environment ACCEL_FSDP_TRANSFORMER_CLS_TO_WRAP) chooses "
                       "stage 3's units, but the sharding is zero_stage 2 (environment ACCEL_FSDP_SHARDING_STRATEGY, "
                       "sharding_strategy SHARD_GRAD_OP); give FULL_SHARD or HYBRID_SHARD (or zero_stage 3), or leave "
                       "it out",
                       Error);
  CHECK_THROWS_WITH_AS(resolve_settings(quiet(), with_env({{"ACCEL_FSDP_SHARDING_STRATEGY", "FULL_SHARD"},
                                                            {"ACCEL_FSDP_TRANSFORMER_CLS_TO_WRAP", "GPTBlock,"}})),
                       "Accelerator: fsdp_transformer_layer_cls_to_wrap 'GPTBlock,' from environment "
                       "ACCEL_FSDP_TRANSFORMER_CLS_TO_WRAP is not valid; expected module type names (letters, digits "
                       "and '_', not starting with a digit) separated by commas",
                       Error);
  // Not a class name: no module could match it, and to_yaml could not write it back as it was read.
  for (const std::string bad : {"GPT Block", "2Block", "GPT\xff", "Block[1]", "a:b"})
    CHECK_THROWS_AS(resolve_settings(quiet(), with_env({{"ACCEL_FSDP_SHARDING_STRATEGY", "FULL_SHARD"},
                                                         {"ACCEL_FSDP_TRANSFORMER_CLS_TO_WRAP", bad}})),
                    Error);
  CHECK_THROWS_WITH_AS(resolve_settings(quiet(), with_env({{"ACCEL_FSDP_SHARDING_STRATEGY", "FULL_SHARD"},
                                                            {"ACCEL_FSDP_MIN_NUM_PARAMS", "0"}})),
                       "Accelerator: fsdp_min_num_params '0' from environment ACCEL_FSDP_MIN_NUM_PARAMS is not valid; "
                       "expected an integer >= 1",
                       Error);

  // The config file: a list or one string, written back by to_yaml; refused without a stage 3.
  const std::string path = (std::filesystem::temp_directory_path() / "accel_test_wrap_config.yaml").string();
  {
    std::ofstream out(path);
    out << "fsdp_sharding_strategy: FULL_SHARD\nfsdp_transformer_layer_cls_to_wrap: [GPTBlock, MLP]\n";
  }
  AcceleratorOptions f = quiet();
  f.config_file = path;
  s = resolve_settings(f, kNoEnv);
  CHECK(s.auto_wrap.value.module_types == std::vector<std::string>{"GPTBlock", "MLP"});
  CHECK(s.auto_wrap.source == "config file");
  s = resolve_settings(f, with_env({{"ACCEL_FSDP_MIN_NUM_PARAMS", "7"}}));  // the environment over the file
  CHECK(s.auto_wrap.value.module_types.empty());
  CHECK(s.auto_wrap.value.min_num_params == 7);
  const ConfigFile c = load_config(path);
  CHECK(parse_config(to_yaml(c), "round trip") == c);
  std::filesystem::remove(path);
  CHECK(parse_config("zero_stage: 3\nfsdp_min_num_params: 100\n", "t.yaml").fsdp_min_num_params == 100);
  CHECK(parse_config("fsdp_sharding_strategy: HYBRID_SHARD\nfsdp_transformer_layer_cls_to_wrap: 'A, B'\n", "t.yaml")
            .fsdp_transformer_layer_cls_to_wrap == std::vector<std::string>{"A", "B"});
  // The fuzzer's find: bytes that are no class name were taken, and to_yaml wrote a list YAML refuses.
  CHECK_THROWS_WITH_AS(parse_config("zero_stage: 3\nfsdp_transformer_layer_cls_to_wrap: [GPT2Bl\xff, MLP]\n", "t.yaml"),
                       "t.yaml:2: fsdp_transformer_layer_cls_to_wrap must be module type names (letters, digits and "
                       "'_', not starting with a digit) separated by commas, got 'GPT2Bl\xff,MLP'",
                       Error);
  CHECK_THROWS_WITH_AS(parse_config("fsdp_sharding_strategy: SHARD_GRAD_OP\nfsdp_min_num_params: 100\n", "t.yaml"),
                       "t.yaml: fsdp_transformer_layer_cls_to_wrap and fsdp_min_num_params choose stage 3's units, "
                       "but the sharding is zero_stage 0, fsdp_sharding_strategy 'SHARD_GRAD_OP'; give FULL_SHARD or "
                       "HYBRID_SHARD (or zero_stage 3), or leave them out",
                       Error);
}

TEST_CASE("stage 3's reshard_after_forward from FSDPPlugin in code, else ACCEL_FSDP_RESHARD_AFTER_FORWARD (or "
          "Accelerate's name), else the config file; false for another stage, or true with HYBRID_SHARD_ZERO2, fails") {
  EffectiveSettings s = resolve_settings(quiet(), with_env({{"ACCEL_FSDP_SHARDING_STRATEGY", "FULL_SHARD"}}));
  CHECK(s.reshard_after_forward.value);
  CHECK(s.reshard_after_forward.source == "default");
  CHECK(s.describe().find("reshard_after_forward") == std::string::npos);

  s = resolve_settings(quiet(), with_env({{"ACCEL_FSDP_SHARDING_STRATEGY", "FULL_SHARD"},
                                          {"ACCEL_FSDP_RESHARD_AFTER_FORWARD", "false"}}));
  CHECK_FALSE(s.reshard_after_forward.value);
  CHECK(s.describe().find(", zero_stage=3 (environment ACCEL_FSDP_SHARDING_STRATEGY, sharding_strategy FULL_SHARD), "
                          "reshard_after_forward=false (environment ACCEL_FSDP_RESHARD_AFTER_FORWARD)") !=
        std::string::npos);
  // Accelerate's FSDP2 name, Python's spelling, read under ACCELERATE_USE_FSDP only.
  s = resolve_settings(quiet(), with_env({{"ACCELERATE_USE_FSDP", "true"}, {"FSDP_SHARDING_STRATEGY", "1"},
                                          {"FSDP_RESHARD_AFTER_FORWARD", "False"}}));
  CHECK_FALSE(s.reshard_after_forward.value);
  CHECK(s.reshard_after_forward.source == "environment FSDP_RESHARD_AFTER_FORWARD");
  s = resolve_settings(quiet(), with_env({{"ACCEL_ZERO_STAGE", "3"}, {"FSDP_RESHARD_AFTER_FORWARD", "false"}}));
  CHECK(s.reshard_after_forward.value);
  // The plugin in code brings its own, the environment's notwithstanding.
  AcceleratorOptions o = quiet();
  o.fsdp_plugin = FSDPPlugin{};
  s = resolve_settings(o, with_env({{"ACCEL_FSDP_RESHARD_AFTER_FORWARD", "0"}}));
  CHECK(s.reshard_after_forward.value);
  CHECK(s.reshard_after_forward.source == "code");
  // HYBRID_SHARD_ZERO2 means false; the reason is named.
  s = resolve_settings(quiet(), with_env({{"ACCEL_FSDP_SHARDING_STRATEGY", "HYBRID_SHARD_ZERO2"}}));
  CHECK_FALSE(s.reshard_after_forward.value);
  CHECK(s.reshard_after_forward.source == "environment ACCEL_FSDP_SHARDING_STRATEGY, sharding_strategy HYBRID_SHARD_ZERO2");

  CHECK_THROWS_WITH_AS(resolve_settings(quiet(), with_env({{"ACCEL_FSDP_SHARDING_STRATEGY", "SHARD_GRAD_OP"},
                                                            {"ACCEL_FSDP_RESHARD_AFTER_FORWARD", "false"}})),
                       "Accelerator: reshard_after_forward false (environment ACCEL_FSDP_RESHARD_AFTER_FORWARD) is for "
                       "stage 3, whose parameters are sharded, but the sharding is zero_stage 2 (environment "
                       "ACCEL_FSDP_SHARDING_STRATEGY, sharding_strategy SHARD_GRAD_OP); give FULL_SHARD or HYBRID_SHARD "
                       "(or zero_stage 3), or leave it out",
                       Error);
  CHECK_THROWS_WITH_AS(resolve_settings(quiet(), with_env({{"ACCEL_FSDP_SHARDING_STRATEGY", "HYBRID_SHARD_ZERO2"},
                                                            {"ACCEL_FSDP_RESHARD_AFTER_FORWARD", "true"}})),
                       "Accelerator: reshard_after_forward true (environment ACCEL_FSDP_RESHARD_AFTER_FORWARD) "
                       "contradicts zero_stage 3 (environment ACCEL_FSDP_SHARDING_STRATEGY, sharding_strategy "
                       "HYBRID_SHARD_ZERO2), which keeps the units gathered from forward to backward; give "
                       "HYBRID_SHARD, or leave reshard_after_forward out",
                       Error);
  CHECK_THROWS_WITH_AS(resolve_settings(quiet(), with_env({{"ACCEL_FSDP_SHARDING_STRATEGY", "FULL_SHARD"},
                                                            {"ACCEL_FSDP_RESHARD_AFTER_FORWARD", "FULL_SHARD"}})),
                       "Accelerator: reshard_after_forward 'FULL_SHARD' from environment "
                       "ACCEL_FSDP_RESHARD_AFTER_FORWARD is not valid; expected 1, 0, true or false",
                       Error);

  // The config file: below the environment, written back by to_yaml, refused without a stage 3.
  const std::string path = (std::filesystem::temp_directory_path() / "accel_test_reshard_config.yaml").string();
  {
    std::ofstream out(path);
    out << "fsdp_sharding_strategy: FULL_SHARD\nfsdp_reshard_after_forward: false\n";
  }
  AcceleratorOptions f = quiet();
  f.config_file = path;
  s = resolve_settings(f, kNoEnv);
  CHECK_FALSE(s.reshard_after_forward.value);
  CHECK(s.reshard_after_forward.source == "config file");
  s = resolve_settings(f, with_env({{"ACCEL_FSDP_RESHARD_AFTER_FORWARD", "true"}}));
  CHECK(s.reshard_after_forward.value);
  const ConfigFile c = load_config(path);
  CHECK_FALSE(c.fsdp_reshard_after_forward);
  CHECK(parse_config(to_yaml(c), "round trip") == c);
  std::filesystem::remove(path);
  CHECK_THROWS_WITH_AS(parse_config("zero_stage: 2\nfsdp_reshard_after_forward: false\n", "t.yaml"),
                       "t.yaml: fsdp_reshard_after_forward false is for stage 3, whose parameters are sharded, but "
                       "the sharding is zero_stage 2, fsdp_sharding_strategy ''; give FULL_SHARD or HYBRID_SHARD (or "
                       "zero_stage 3), or leave it out",
                       Error);
}

TEST_CASE("the config file's zero_stage or fsdp_sharding_strategy, below code and environment") {
  const std::string path = (std::filesystem::temp_directory_path() / "accel_test_zero_config.yaml").string();
  {
    std::ofstream out(path);
    out << "zero_stage: 3\n";
  }
  AcceleratorOptions o = quiet();
  o.config_file = path;
  EffectiveSettings s = resolve_settings(o, kNoEnv);
  CHECK(s.zero_stage.value == 3);
  CHECK(s.zero_stage.source == "config file");
  s = resolve_settings(o, with_env({{"ACCEL_ZERO_STAGE", "1"}}));
  CHECK(s.zero_stage.value == 1);
  ConfigFile c = parse_config("fsdp_sharding_strategy: SHARD_GRAD_OP\n", "test.yaml");
  CHECK(c.fsdp_sharding_strategy == "SHARD_GRAD_OP");
  CHECK(parse_config(to_yaml(c), "round trip") == c);
  CHECK_THROWS_WITH_AS(parse_config("zero_stage: 2\nfsdp_sharding_strategy: FULL_SHARD\n", "test.yaml"),
                       "test.yaml: zero_stage 2 and fsdp_sharding_strategy FULL_SHARD are two ways to shard; give one",
                       Error);
  CHECK_THROWS_WITH_AS(parse_config("zero_stage: 5\n", "test.yaml"),
                       "test.yaml:1: zero_stage must be 0, 1, 2 or 3, got 5", Error);
  std::filesystem::remove(path);
}

TEST_CASE("tp_size comes from ParallelismConfig in code, else ACCEL_TP_SIZE (or Accelerate's name), else the config "
          "file, else 1") {
  AcceleratorOptions o = quiet();
  EffectiveSettings s = resolve_settings(o, kNoEnv);
  CHECK(s.tp_size.value == 1);
  CHECK(s.tp_size.source == "default");
  CHECK(s.describe().find("tp_size") == std::string::npos);  // named only once asked for

  s = resolve_settings(o, with_env({{"ACCEL_TP_SIZE", "2"}}));
  CHECK(s.tp_size.value == 2);
  CHECK(s.tp_size.source == "environment ACCEL_TP_SIZE");
  s = resolve_settings(o, with_env({{"PARALLELISM_CONFIG_TP_SIZE", "4"}}));
  CHECK(s.tp_size.value == 4);
  CHECK(s.describe().find(", tp_size=4 (environment PARALLELISM_CONFIG_TP_SIZE") != std::string::npos);

  o.parallelism_config = ParallelismConfig{.tp_size = 2, .dp_size = 3};
  s = resolve_settings(o, with_env({{"ACCEL_TP_SIZE", "4"}}));
  CHECK(s.tp_size.value == 2);  // code wins
  CHECK(s.dp_size == 3);
  CHECK(s.describe().find(", tp_size=2 (code)") != std::string::npos);

  o.parallelism_config = ParallelismConfig{.tp_size = 0};
  CHECK_THROWS_WITH_AS(resolve_settings(o, kNoEnv),
                       doctest::Contains("tp_size '0' from code is not valid; expected an integer >= 1"), Error);
  o.parallelism_config = ParallelismConfig{.tp_size = 2, .dp_size = -1};
  CHECK_THROWS_WITH_AS(resolve_settings(o, kNoEnv),
                       "Accelerator: ParallelismConfig dp_size -1 must be 0 (the world / tp_size) or positive", Error);

  ConfigFile c = parse_config("num_processes: 4\ntp_size: 2\n", "test.yaml");
  CHECK(c.tp_size == 2);
  CHECK(parse_config(to_yaml(c), "round trip") == c);
  CHECK_THROWS_WITH_AS(parse_config("num_processes: 4\ntp_size: 3\n", "test.yaml"),
                       "test.yaml: tp_size 3 does not divide num_processes 4", Error);
}
