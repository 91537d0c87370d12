// Accelerate's spellings read as accel's: ACCELERATE_* variables as their ACCEL_* names (ACCEL_* wins,
// a note names each alias), the debug setting resolved like the others, the config files
// `accelerate config` writes (the checked-in fixtures) read for their keys with a meaning here and the
// others listed, and the per-rank memory formulas against hand-computed bytes.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstring>
#include <string>
#include <vector>

#include "accel.h"
#include "runtime/accelerate_names.h"
#include "runtime/config_file.h"
#include "runtime/safetensors.h"
#include "runtime/strategy/memory_estimate.h"

using namespace accel;

namespace {

const std::string kFixtures = ACCEL_TEST_FIXTURES_DIR;
const char* kNoFile = "/nonexistent/accel-test-accelerate.yaml";

EnvironmentVariables env_of(std::initializer_list<std::pair<const std::string, std::string>> values) {
  EnvironmentVariables env(values);
  env["ACCEL_CONFIG_FILE"] = kNoFile;
  return env;
}

}  // namespace

TEST_CASE("ACCELERATE_* variables stand for their ACCEL_* names; ACCEL_* wins; Python's True/False read as switches") {
  AcceleratorOptions o;
  EffectiveSettings s = resolve_settings(o, env_of({{"ACCELERATE_MIXED_PRECISION", "bf16"},
                                                    {"ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "3"},
                                                    {"ACCELERATE_USE_CPU", "True"},
                                                    {"ACCELERATE_DEBUG_MODE", "true"}}));
  CHECK(s.mixed_precision.value == MixedPrecision::bf16);
  CHECK(s.mixed_precision.source == "environment ACCELERATE_MIXED_PRECISION");
  CHECK(s.gradient_accumulation_steps.value == 3);
  CHECK(s.cpu.value);
  CHECK(s.debug.value);
  CHECK(s.debug.source == "environment ACCELERATE_DEBUG_MODE");
  CHECK(s.alias_notes == std::vector<std::string>{
      "accel: reading ACCELERATE_MIXED_PRECISION=bf16 as ACCEL_MIXED_PRECISION (Accelerate's name; "
      "ACCEL_MIXED_PRECISION wins when both are set)",
      "accel: reading ACCELERATE_GRADIENT_ACCUMULATION_STEPS=3 as ACCEL_GRADIENT_ACCUMULATION_STEPS (Accelerate's "
      "name; ACCEL_GRADIENT_ACCUMULATION_STEPS wins when both are set)",
      "accel: reading ACCELERATE_USE_CPU=True as ACCEL_USE_CPU (Accelerate's name; ACCEL_USE_CPU wins when both are "
      "set)",
      "accel: reading ACCELERATE_DEBUG_MODE=true as ACCEL_DEBUG (Accelerate's name; ACCEL_DEBUG wins when both are "
      "set)"});

  // Both set: accel's own name, and no note for the alias it did not read.
  s = resolve_settings(o, env_of({{"ACCELERATE_MIXED_PRECISION", "bf16"}, {"ACCEL_MIXED_PRECISION", "fp16"}}));
  CHECK(s.mixed_precision.value == MixedPrecision::fp16);
  CHECK(s.mixed_precision.source == "environment ACCEL_MIXED_PRECISION");
  CHECK(s.alias_notes.empty());

  // A bad value through the alias names the alias.
  CHECK_THROWS_WITH_AS(resolve_settings(o, env_of({{"ACCELERATE_USE_CPU", "maybe"}})),
                       "Accelerator: cpu 'maybe' from environment ACCELERATE_USE_CPU is not valid; expected true or "
                       "false",
                       Error);
}

TEST_CASE("Accelerate's ZeRO stage and FSDP strategy variables count only under their ACCELERATE_USE_* switch") {
  AcceleratorOptions o;
  EffectiveSettings s = resolve_settings(o, env_of({{"ACCELERATE_DEEPSPEED_ZERO_STAGE", "3"}}));
  CHECK(s.zero_stage.value == 0);  // Accelerate ignores it without ACCELERATE_USE_DEEPSPEED, so do we
  s = resolve_settings(o, env_of({{"ACCELERATE_DEEPSPEED_ZERO_STAGE", "3"}, {"ACCELERATE_USE_DEEPSPEED", "true"}}));
  CHECK(s.zero_stage.value == 3);
  CHECK(s.zero_stage.source == "environment ACCELERATE_DEEPSPEED_ZERO_STAGE");
  s = resolve_settings(o, env_of({{"FSDP_SHARDING_STRATEGY", "2"}, {"ACCELERATE_USE_FSDP", "True"}}));
  CHECK(s.zero_stage.value == 2);  // Accelerate's number 2 is SHARD_GRAD_OP
  CHECK(s.sharding_via == "fsdp");
  CHECK(s.zero_stage.source == "environment FSDP_SHARDING_STRATEGY, sharding_strategy SHARD_GRAD_OP");
}

TEST_CASE("accelerate_switch and accelerate_sharding_strategy read Accelerate's spellings") {
  for (const char* yes : {"1", "True", "yes", "Y", "on", "t"}) CHECK(accelerate_switch(yes) == true);
  for (const char* no : {"0", "False", "no", "N", "off", "f"}) CHECK(accelerate_switch(no) == false);
  CHECK_FALSE(accelerate_switch("2").has_value());
  CHECK(accelerate_sharding_strategy("1") == "FULL_SHARD");
  CHECK(accelerate_sharding_strategy("2") == "SHARD_GRAD_OP");
  CHECK(accelerate_sharding_strategy("3") == "NO_SHARD");
  CHECK(accelerate_sharding_strategy("4") == "HYBRID_SHARD");
  CHECK(accelerate_sharding_strategy("NO_SHARD") == "NO_SHARD");
  CHECK(accelerate_sharding_strategy("5") == "HYBRID_SHARD_ZERO2");
  CHECK_FALSE(accelerate_sharding_strategy("6").has_value());
  CHECK_FALSE(accelerate_sharding_strategy("full_shard").has_value());
}

TEST_CASE("debug: code, then ACCEL_DEBUG, then the config file's debug, then off; on the settings line when on") {
  AcceleratorOptions o;
  EffectiveSettings s = resolve_settings(o, env_of({}));
  CHECK_FALSE(s.debug.value);
  CHECK(s.debug.source == "default");
  CHECK(s.describe().find("debug") == std::string::npos);  // the default line stays as it was
  s = resolve_settings(o, env_of({{"ACCEL_DEBUG", "1"}}));
  CHECK(s.debug.value);
  CHECK(s.describe().find(", debug=true (environment ACCEL_DEBUG)") != std::string::npos);
  o.debug = false;
  CHECK_FALSE(resolve_settings(o, env_of({{"ACCEL_DEBUG", "1"}})).debug.value);
  CHECK(parse_config("debug: true\n", "t.yaml").debug);
  CHECK_THROWS_WITH_AS(parse_config("debug: sometimes\n", "t.yaml"),
                       "t.yaml:1: debug must be true or false, got 'sometimes'", Error);
  ConfigFile c;
  c.debug = true;
  CHECK(parse_config(to_yaml(c), "round trip") == c);
}

TEST_CASE("an Accelerate MULTI_GPU config: its meaningful keys read, the others listed as ignored in file order") {
  const ConfigFile c = load_config(kFixtures + "/accelerate/multi_gpu.yaml");
  CHECK(c.origin.format == "accelerate");
  CHECK(c.num_processes == 8);
  CHECK(c.num_machines == 1);
  CHECK(c.machine_rank == 0);
  CHECK(c.mixed_precision == MixedPrecision::bf16);
  CHECK_FALSE(c.use_cpu);
  CHECK_FALSE(c.debug);
  CHECK(c.zero_stage == 0);
  CHECK(c.fsdp_sharding_strategy.empty());
  CHECK(c.origin.ignored_keys == std::vector<std::string>{"downcast_bf16", "enable_cpu_affinity", "gpu_ids",
                                                   "main_training_function", "rdzv_backend", "same_network",
                                                   "tpu_env", "tpu_use_cluster", "tpu_use_sudo"});
}

TEST_CASE("an Accelerate DeepSpeed config gives the ZeRO stage and the accumulation steps") {
  const ConfigFile c = load_config(kFixtures + "/accelerate/deepspeed.yaml");
  CHECK(c.zero_stage == 2);
  CHECK(c.gradient_accumulation_steps == 4);
  CHECK(c.mixed_precision == MixedPrecision::fp16);
  CHECK(c.num_processes == 4);
  CHECK(c.origin.ignored_keys == std::vector<std::string>{
      "deepspeed_config.gradient_clipping", "deepspeed_config.offload_optimizer_device",
      "deepspeed_config.offload_param_device", "deepspeed_config.zero3_init_flag", "downcast_bf16",
      "enable_cpu_affinity", "main_training_function", "rdzv_backend", "same_network", "tpu_env", "tpu_use_cluster",
      "tpu_use_sudo"});
}

TEST_CASE("an Accelerate FSDP config on two machines: the numbered strategy, the machine keys, debug") {
  const ConfigFile c = load_config(kFixtures + "/accelerate/fsdp_two_machines.yaml");
  CHECK(c.fsdp_sharding_strategy == "SHARD_GRAD_OP");
  CHECK(c.zero_stage == 0);
  CHECK(c.environment == "hosts");
  CHECK(c.num_machines == 2);
  CHECK(c.machine_rank == 1);
  CHECK(c.main_process_ip == "10.0.0.1");
  CHECK(c.main_process_port == 29501);
  CHECK(c.num_processes == 16);
  CHECK(c.debug);
  CHECK(c.origin.ignored_keys.size() == 18);
  // The same values written in accel's format are the same config (the origin is not a value).
  const ConfigFile written = parse_config(to_yaml(c), "written.yaml");
  CHECK(written == c);
  CHECK(written.origin.format == "accel");
  CHECK(written.origin.ignored_keys.empty());
  CHECK(c.origin.ignored_keys.front() == "downcast_bf16");
  CHECK(c.origin.ignored_keys[2] == "fsdp_config.fsdp_activation_checkpointing");
}

TEST_CASE("Accelerate files: fsdp_auto_wrap_policy picks which of its two keys gives stage 3's units") {
  const std::string head = "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: FULL_SHARD\n";
  ConfigFile c = parse_config(head + "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
                                     "  fsdp_transformer_layer_cls_to_wrap: GPT2Block,MLP\n  fsdp_min_num_params: 0\n",
                              "a.yaml");
  CHECK(c.fsdp_transformer_layer_cls_to_wrap == std::vector<std::string>{"GPT2Block", "MLP"});
  CHECK(c.fsdp_min_num_params == 0);
  CHECK(c.origin.ignored_keys == std::vector<std::string>{"fsdp_config.fsdp_min_num_params"});
  c = parse_config(head + "  fsdp_auto_wrap_policy: SIZE_BASED_WRAP\n  fsdp_min_num_params: 100000\n"
                          "  fsdp_transformer_layer_cls_to_wrap: GPT2Block\n",
                   "a.yaml");
  CHECK(c.fsdp_transformer_layer_cls_to_wrap.empty());
  CHECK(c.fsdp_min_num_params == 100000);
  CHECK(c.origin.ignored_keys == std::vector<std::string>{"fsdp_config.fsdp_transformer_layer_cls_to_wrap"});
  c = parse_config(head + "  fsdp_auto_wrap_policy: NO_WRAP\n", "a.yaml");
  CHECK(c.fsdp_transformer_layer_cls_to_wrap.empty());
  CHECK(c.origin.ignored_keys == std::vector<std::string>{"fsdp_config.fsdp_auto_wrap_policy"});
  CHECK_THROWS_WITH_AS(parse_config(head + "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n", "a.yaml"),
                       "a.yaml:4: fsdp_config.fsdp_auto_wrap_policy TRANSFORMER_BASED_WRAP needs "
                       "fsdp_transformer_layer_cls_to_wrap (accel cannot read a model's _no_split_modules)",
                       Error);
  CHECK_THROWS_WITH_AS(parse_config(head + "  fsdp_auto_wrap_policy: BY_MAGIC\n", "a.yaml"),
                       "a.yaml:4: fsdp_config.fsdp_auto_wrap_policy must be TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP "
                       "or NO_WRAP, got 'BY_MAGIC'",
                       Error);
}

TEST_CASE("Accelerate files: FSDP2's reshard flag, a block of another distributed_type, nulls, and what is refused") {
  ConfigFile c = parse_config("distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  fsdp_reshard_after_forward: false\n",
                              "a.yaml");
  CHECK(c.fsdp_sharding_strategy == "SHARD_GRAD_OP");
  CHECK(c.origin.ignored_keys == std::vector<std::string>{"fsdp_config.fsdp_version"});
  c = parse_config("distributed_type: FSDP\nfsdp_config:\n  fsdp_reshard_after_forward: true\n", "a.yaml");
  CHECK(c.fsdp_sharding_strategy == "FULL_SHARD");
  // A DeepSpeed block under MULTI_GPU means nothing to Accelerate either.
  c = parse_config("distributed_type: MULTI_GPU\ndeepspeed_config:\n  zero_stage: 3\nmain_process_ip: null\n", "a.yaml");
  CHECK(c.zero_stage == 0);
  CHECK(c.main_process_ip.empty());
  CHECK(c.origin.ignored_keys == std::vector<std::string>{"deepspeed_config"});
  CHECK(parse_config("compute_environment: LOCAL_MACHINE\nmixed_precision: 'no'\n", "a.yaml").origin.format == "accelerate");

  CHECK_THROWS_WITH_AS(parse_config("distributed_type: TPU\n", "a.yaml"),
                       "a.yaml:1: distributed_type 'TPU' has no equivalent in accel, which runs on CPUs and CUDA GPUs; "
                       "expected NO, MULTI_CPU, MULTI_GPU, DEEPSPEED or FSDP",
                       Error);
  CHECK_THROWS_WITH_AS(parse_config("compute_environment: AMAZON_SAGEMAKER\n", "a.yaml"),
                       "a.yaml:1: compute_environment 'AMAZON_SAGEMAKER' is not one accel launches on; expected "
                       "LOCAL_MACHINE",
                       Error);
  CHECK_THROWS_WITH_AS(parse_config("distributed_type: NO\nnum_processes: 2\nnum_processes: 3\n", "a.yaml"),
                       "a.yaml:3: key 'num_processes' appears twice", Error);
  // Accel's own checks and lines apply to the values read.
  CHECK_THROWS_WITH_AS(parse_config("distributed_type: NO\n\nnum_processes: 0\n", "a.yaml"),
                       "a.yaml:3: num_processes must be an integer >= 1, got '0'", Error);
  CHECK_THROWS_WITH_AS(parse_config("distributed_type: NO\nmixed_precision: fp4\n", "a.yaml"),
                       "a.yaml:2: mixed_precision must be one of no, fp16, bf16, fp8, got 'fp4'", Error);
  CHECK_THROWS_WITH_AS(parse_config("distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: 7\n", "a.yaml"),
                       doctest::Contains("a.yaml:3: fsdp_config.fsdp_sharding_strategy must be FULL_SHARD"), Error);
  // accel's own format stays strict: an Accelerate key without the markers is an unknown key.
  CHECK_THROWS_WITH_AS(parse_config("num_processes: 2\ngpu_ids: all\n", "a.yaml"),
                       doctest::Contains("a.yaml:2: unknown key 'gpu_ids'"), Error);
}

TEST_CASE("an Accelerate fp8 config: fp8_config's recipe keys read under both of Accelerate's spellings") {
  const ConfigFile c = load_config(kFixtures + "/accelerate/fp8.yaml");
  CHECK(c.mixed_precision == MixedPrecision::fp8);
  CHECK(c.fp8_format == fp8::Format::e4m3);
  CHECK(c.fp8_margin == 1);
  CHECK(c.fp8_amax_history_len == 16);
  CHECK(c.fp8_amax_compute_algo == fp8::AmaxAlgorithm::most_recent);
  CHECK(c.origin.ignored_keys == std::vector<std::string>{
      "downcast_bf16", "enable_cpu_affinity", "fp8_config.override_linear_precision",
      "fp8_config.use_autocast_during_eval", "gpu_ids", "main_training_function", "rdzv_backend", "same_network",
      "tpu_env", "tpu_use_cluster", "tpu_use_sudo"});

  // `accelerate launch` and TERecipeKwargs spell two keys shorter; a null block is no block.
  ConfigFile short_names = parse_config(
      "distributed_type: NO\nfp8_config:\n  amax_history_len: 8\n  amax_compute_algo: max\n  backend: te\n", "a.yaml");
  CHECK(short_names.fp8_amax_history_len == 8);
  CHECK(short_names.fp8_amax_compute_algo == fp8::AmaxAlgorithm::max);
  CHECK(short_names.origin.ignored_keys.empty());
  CHECK(parse_config("distributed_type: NO\nfp8_config: null\n", "a.yaml").fp8_amax_history_len == 1024);

  // What accel cannot honour is refused, naming the line and the value; accel's own checks apply.
  CHECK_THROWS_WITH_AS(parse_config("distributed_type: NO\nfp8_config:\n  backend: MSAMP\n", "a.yaml"),
                       "a.yaml:3: fp8_config.backend 'MSAMP' has no equivalent in accel, whose fp8 is Transformer "
                       "Engine's delayed scaling; expected TE",
                       Error);
  CHECK_THROWS_WITH_AS(parse_config("distributed_type: NO\nfp8_config:\n  interval: 4\n", "a.yaml"),
                       "a.yaml:3: fp8_config.interval 4 is not supported: accel recomputes the fp8 scales every "
                       "step; expected 1",
                       Error);
  CHECK_THROWS_WITH_AS(
      parse_config("distributed_type: NO\nfp8_config:\n  amax_history_len: 8\n  amax_history_length: 9\n", "a.yaml"),
      "a.yaml:4: fp8_config.amax_history_length sets fp8_amax_history_len a second time", Error);
  CHECK_THROWS_WITH_AS(parse_config("distributed_type: NO\nfp8_config:\n  amax_history_length: 0\n", "a.yaml"),
                       doctest::Contains("a.yaml:3: fp8_amax_history_len must be an integer >= 1"), Error);
  CHECK_THROWS_WITH_AS(parse_config("distributed_type: NO\nfp8_config:\n  fp8_format: E5M2\n", "a.yaml"),
                       "a.yaml:3: fp8_format must be one of HYBRID, E4M3, got 'E5M2'", Error);
}

TEST_CASE("ACCELERATE_FP8_* variables give fp8's recipe, in the case Accelerate reads them; ACCEL_FP8_* wins") {
  AcceleratorOptions o;
  EffectiveSettings s = resolve_settings(o, env_of({{"ACCELERATE_MIXED_PRECISION", "fp8"},
                                                    {"ACCELERATE_FP8_FORMAT", "e4m3"},
                                                    {"ACCELERATE_FP8_MARGIN", "2"},
                                                    {"ACCELERATE_FP8_AMAX_HISTORY_LEN", "32"},
                                                    {"ACCELERATE_FP8_AMAX_COMPUTE_ALGO", "MOST_RECENT"}}));
  CHECK(s.mixed_precision.value == MixedPrecision::fp8);
  CHECK(s.fp8.format.value == fp8::Format::e4m3);
  CHECK(s.fp8.format.source == "environment ACCELERATE_FP8_FORMAT");
  CHECK(s.fp8.margin.value == 2);
  CHECK(s.fp8.amax_history_len.value == 32);
  CHECK(s.fp8.amax_history_len.source == "environment ACCELERATE_FP8_AMAX_HISTORY_LEN");
  CHECK(s.fp8.amax_compute_algo.value == fp8::AmaxAlgorithm::most_recent);
  CHECK(s.alias_notes.size() == 5);

  s = resolve_settings(o, env_of({{"ACCELERATE_FP8_MARGIN", "2"}, {"ACCEL_FP8_MARGIN", "3"}}));
  CHECK(s.fp8.margin.value == 3);
  CHECK(s.fp8.margin.source == "environment ACCEL_FP8_MARGIN");
  CHECK_THROWS_WITH_AS(resolve_settings(o, env_of({{"ACCELERATE_FP8_AMAX_HISTORY_LEN", "0"}})),
                       doctest::Contains("ACCELERATE_FP8_AMAX_HISTORY_LEN"), Error);
}

TEST_CASE("estimate_memory: ZeRO's formulas for f32 Adam, and what accel holds beyond them") {
  const int64_t psi = 124'439'808;  // GPT-2 small
  MemoryEstimate m = estimate_memory(psi, 0, 1, MixedPrecision::no);
  CHECK(m.parameters == 497'759'232);        // 4 Ψ
  CHECK(m.gradients == 497'759'232);         // 4 Ψ
  CHECK(m.optimizer_state == 995'518'464);   // 8 Ψ
  CHECK(m.weight_copies == 0);
  CHECK(m.total() == 1'991'036'928);         // 16 Ψ
  CHECK(estimate_memory(psi, 0, 8, MixedPrecision::no).total() == 1'991'036'928);  // DDP: N does not matter
  m = estimate_memory(psi, 1, 4, MixedPrecision::no);  // 4Ψ + 4Ψ + 8Ψ/4
  CHECK(m.parameters == 497'759'232);
  CHECK(m.gradients == 497'759'232);
  CHECK(m.optimizer_state == 248'879'616);
  CHECK(m.formula_total() == 1'244'398'080);
  CHECK(m.total() == 1'244'398'080);  // accel's stage 1 holds the formula: its grad slices are views
  m = estimate_memory(psi, 2, 8, MixedPrecision::no);  // 4Ψ + 12Ψ/8
  CHECK(m.parameters == 497'759'232);
  CHECK(m.gradients == 62'219'904);
  CHECK(m.optimizer_state == 124'439'808);
  m = estimate_memory(psi, 3, 8, MixedPrecision::no);  // 16Ψ/8
  CHECK(m.total() == 248'879'616);
  // bf16/fp16 under ZeRO: 16-bit parameters and grads, the f32 masters sharded (2 + 2 + 12 bytes).
  m = estimate_memory(psi, 1, 4, MixedPrecision::bf16);  // 2Ψ + 2Ψ + 12Ψ/4
  CHECK(m.parameters == 248'879'616);
  CHECK(m.gradients == 248'879'616);
  CHECK(m.master_weights == 124'439'808);
  CHECK(m.optimizer_state == 248'879'616);
  CHECK(m.weight_copies == 0);
  CHECK(m.total() == 871'078'656);  // 7Ψ
  m = estimate_memory(psi, 2, 8, MixedPrecision::fp16);  // 2Ψ + 14Ψ/8
  CHECK(m.gradients == 31'109'952);
  CHECK(m.total() == 466'649'280);
  m = estimate_memory(psi, 3, 8, MixedPrecision::bf16);  // 16Ψ/8, nothing whole
  CHECK(m.parameters == 31'109'952);
  CHECK(m.weight_copies == 0);
  CHECK(m.total() == 248'879'616);
  // DDP keeps f32 masters and grads, plus the 2Ψ of copies autocast reads.
  CHECK(estimate_memory(psi, 0, 1, MixedPrecision::fp16).total() == 2'239'916'544);  // 18 Ψ
  CHECK(estimate_memory(psi, 0, 1, MixedPrecision::fp16).master_weights == 0);
  // fp8 is accepted and counted as bf16: the 2Ψ of copies bound what its bf16 Linears and the rest use.
  CHECK(estimate_memory(psi, 3, 8, MixedPrecision::fp8).weight_copies == 248'879'616);
  CHECK(estimate_memory(psi, 0, 1, MixedPrecision::no, 4).optimizer_state == 497'759'232);  // SGD momentum
  m = estimate_memory(10, 3, 4, MixedPrecision::no);  // a shard is ceil(10 / 4) = 3 elements
  CHECK(m.parameters == 12);
  CHECK(m.optimizer_state == 24);
  CHECK_THROWS_AS(estimate_memory(psi, 4, 1, MixedPrecision::no), Error);
  CHECK_THROWS_AS(estimate_memory(psi, 0, 0, MixedPrecision::no), Error);
  // HYBRID_SHARD: stage 3 over the shard group, whatever the number of replicas.
  CHECK(estimate_hybrid_shard_memory(psi, 2, 8, MixedPrecision::no).total() == 995'518'464);  // 16Ψ/2
  CHECK(estimate_hybrid_shard_memory(psi, 8, 8, MixedPrecision::bf16).total() ==
        estimate_memory(psi, 3, 8, MixedPrecision::bf16).total());
  CHECK(estimate_hybrid_shard_memory(psi, 1, 4, MixedPrecision::no).total() == 1'991'036'928);  // replicas only: 16Ψ
  CHECK_THROWS_WITH_AS(estimate_hybrid_shard_memory(psi, 3, 8, MixedPrecision::no),
                       "estimate_hybrid_shard_memory: got shard groups of 3 over 8 ranks; expected a shard size >= 1 "
                       "that divides the rank count",
                       Error);
}

TEST_CASE("load_safetensors_header lists the tensors without reading them, and counts their elements") {
  const std::string path = kFixtures + "/multi.safetensors";
  const SafetensorsHeader header = load_safetensors_header(path);
  const SafetensorsContents contents = load_safetensors(path);
  REQUIRE(header.tensors.size() == contents.tensors.size());
  int64_t count = 0;
  for (size_t i = 0; i < header.tensors.size(); ++i) {
    CHECK(header.tensors[i].name == contents.tensors[i].first);
    CHECK(header.tensors[i].shape == contents.tensors[i].second.shape());
    CHECK(header.tensors[i].dtype == contents.tensors[i].second.dtype());
    count += contents.tensors[i].second.numel();
  }
  CHECK(header.element_count() == count);
  CHECK(count > 0);
  CHECK_THROWS_AS(load_safetensors_header("/nonexistent.safetensors"), Error);
}

TEST_CASE("read_safetensors_elements reads any run of a tensor's elements, and refuses one outside it") {
  const std::string path = kFixtures + "/multi.safetensors";
  const SafetensorsHeader header = load_safetensors_header(path);
  const SafetensorsContents contents = load_safetensors(path);
  for (size_t i = 0; i < header.tensors.size(); ++i) {
    const SafetensorsEntry& entry = header.tensors[i];
    const Tensor whole = reshape(contents.tensors[i].second, {-1});
    const int64_t n = whole.numel();
    for (int64_t first = 0; first <= n; ++first)
      for (int64_t count = 0; first + count <= n; ++count) {
        const Tensor run = read_safetensors_elements(path, entry, first, count);
        REQUIRE(run.dtype() == entry.dtype);
        REQUIRE(run.shape() == Shape{count});
        CHECK(std::memcmp(run.data_ptr(), contiguous(narrow(whole, 0, first, count)).data_ptr(), run.nbytes()) == 0);
      }
    const std::string expected =
        fmt::format("tensor '{}' has {} elements; elements [{}, {} + 1) are outside it", entry.name, n, n, n);
    CHECK_THROWS_WITH_AS(read_safetensors_elements(path, entry, n, 1), doctest::Contains(expected.c_str()), Error);
    CHECK_THROWS_AS(read_safetensors_elements(path, entry, -1, 1), Error);
  }
}
