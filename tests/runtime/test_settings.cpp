// Typed settings: the fixed values and the one name table of each settings enum, choices given in code
// as enums or as names, and the typed values and sources that resolve_settings returns.
#include <doctest/doctest.h>

#include "accel.h"
#include "runtime/config_file.h"

using namespace accel;

TEST_CASE("settings enums keep fixed values, and each table lists every value once in order") {
  CHECK(static_cast<int>(MixedPrecision::no) == 0);
  CHECK(static_cast<int>(MixedPrecision::fp16) == 1);
  CHECK(static_cast<int>(MixedPrecision::bf16) == 2);
  CHECK(static_cast<int>(MixedPrecision::fp8) == 3);
  CHECK(static_cast<int>(GradCommDType::f32) == 0);
  CHECK(static_cast<int>(GradCommDType::compute) == 1);
  CHECK(static_cast<int>(GradCommDType::f16) == 2);
  CHECK(static_cast<int>(GradCommDType::bf16) == 3);
  CHECK(static_cast<int>(Backend::automatic) == 0);
  CHECK(static_cast<int>(Backend::mpi) == 1);
  CHECK(static_cast<int>(Backend::ring) == 2);
  CHECK(static_cast<int>(Backend::nccl) == 3);
  for (size_t i = 0; i < kMixedPrecisionNames.size(); ++i) CHECK(static_cast<size_t>(kMixedPrecisionNames[i].value) == i);
  for (size_t i = 0; i < kBackendNames.size(); ++i) CHECK(static_cast<size_t>(kBackendNames[i].value) == i);
  for (size_t i = 0; i < kGradCommDTypeNames.size(); ++i) CHECK(static_cast<size_t>(kGradCommDTypeNames[i].value) == i);
}

TEST_CASE("name tables: names both ways; fp8 and FSDP's HYBRID_SHARD are offered") {
  CHECK(std::string(name_of(MixedPrecision::bf16)) == "bf16");
  CHECK(std::string(name_of(Backend::automatic)) == "auto");
  CHECK(value_in(kBackendNames, "ring") == Backend::ring);
  CHECK_FALSE(value_in(kBackendNames, "gloo").has_value());
  CHECK(value_in(kMixedPrecisionNames, "fp8") == MixedPrecision::fp8);
  CHECK(available_in(kMixedPrecisionNames, MixedPrecision::fp8));
  CHECK(available_names(kMixedPrecisionNames) == std::vector<std::string>{"no", "fp16", "bf16", "fp8"});
  CHECK(available_choices(kMixedPrecisionNames) == "no, fp16, bf16 or fp8");
  CHECK(value_in(kShardingStrategyNames, "HYBRID_SHARD") == ShardingStrategy::hybrid_shard);
  CHECK(available_in(kShardingStrategyNames, ShardingStrategy::hybrid_shard));
  CHECK(available_choices(kShardingStrategyNames) ==
        "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD or HYBRID_SHARD_ZERO2");
  CHECK(is_hybrid("HYBRID_SHARD_ZERO2"));
  CHECK(is_hybrid(ShardingStrategy::hybrid_shard));
  CHECK_FALSE(is_hybrid("FULL_SHARD"));
  CHECK_FALSE(is_hybrid("hybrid_shard"));
  CHECK(available_choices(kBackendNames) == "auto, mpi, ring or nccl");
  CHECK(available_choices(kGradCommDTypeNames) == "f32, compute, f16 or bf16");
}

TEST_CASE("a choice in code may be the enum or its name; resolved settings are typed, with their source") {
  AcceleratorOptions o;
  o.config_file = "/nonexistent/accel-test-settings.yaml";
  CHECK_THROWS_AS(resolve_settings(o, {}), Error);  // asked for by name: a missing file is an error
  o.config_file.reset();
  o.mixed_precision = MixedPrecision::bf16;
  o.backend = "ring";
  o.gradient_accumulation_steps = 4;
  const EnvironmentVariables env{{"ACCEL_CONFIG_FILE", "/nonexistent/accel-test-settings.yaml"},
                                 {"ACCEL_GRAD_COMM_DTYPE", "compute"},
                                 {"ACCEL_USE_CPU", "true"}};
  const EffectiveSettings s = resolve_settings(o, env);
  CHECK(s.mixed_precision.value == MixedPrecision::bf16);
  CHECK(s.mixed_precision.source == "code");
  CHECK(s.backend.value == Backend::ring);
  CHECK(s.grad_comm_dtype.value == GradCommDType::compute);
  CHECK(s.grad_comm_dtype.source == "environment ACCEL_GRAD_COMM_DTYPE");
  CHECK(s.cpu.value);
  CHECK(s.gradient_accumulation_steps.value == 4);
  CHECK(s.bucket_cap_mb.value == 25.0);
  CHECK(s.bucket_cap_mb.source == "default");
  CHECK(s.describe() ==
        "mixed_precision=bf16 (code), grad_comm_dtype=compute (environment ACCEL_GRAD_COMM_DTYPE), cpu=true "
        "(environment ACCEL_USE_CPU), gradient_accumulation_steps=4 (code), backend=ring (code), bucket_cap_mb=25 "
        "(default), timeout=600s (default)");
  o.mixed_precision = "fp4";  // not a name the table knows
  CHECK_THROWS_WITH_AS(resolve_settings(o, env),
                       "Accelerator: mixed_precision 'fp4' from code is not valid; expected no, fp16, bf16 or fp8", Error);
}

TEST_CASE("grad_comm_dtype: f32 by default, the compute dtype by default under ZeRO with bf16/fp16, as given when given") {
  const EnvironmentVariables env{{"ACCEL_CONFIG_FILE", "/nonexistent/accel-test-settings.yaml"}};
  AcceleratorOptions o;
  o.mixed_precision = "bf16";
  CHECK(resolve_settings(o, env).grad_comm_dtype.value == GradCommDType::f32);  // DDP's f32 all-reduce
  o.deepspeed_plugin = DeepSpeedPlugin{.zero_stage = 2, .gradient_accumulation_steps = std::nullopt};
  EffectiveSettings s = resolve_settings(o, env);
  CHECK(s.grad_comm_dtype.value == GradCommDType::compute);
  CHECK(s.describe().find("grad_comm_dtype=compute (default under ZeRO with bf16/fp16)") != std::string::npos);
  o.mixed_precision = "no";  // f32 grads: f32 stays the default
  CHECK(resolve_settings(o, env).grad_comm_dtype.value == GradCommDType::f32);
  o.mixed_precision = "fp16";
  o.grad_comm_dtype = "f32";  // given: ZeRO widens its 16-bit grads to f32 for the reduce-scatter
  s = resolve_settings(o, env);
  CHECK(s.grad_comm_dtype.value == GradCommDType::f32);
  CHECK(s.grad_comm_dtype.source == "code");
  o.grad_comm_dtype.reset();
  CHECK(resolve_settings(o, {{"ACCEL_CONFIG_FILE", "/nonexistent/accel-test-settings.yaml"},
                             {"ACCEL_GRAD_COMM_DTYPE", "f32"}})
            .grad_comm_dtype.value == GradCommDType::f32);
  o.deepspeed_plugin.reset();
  o.fsdp_plugin = FSDPPlugin{.sharding_strategy = ShardingStrategy::full_shard, .auto_wrap = {}};
  CHECK(resolve_settings(o, env).grad_comm_dtype.value == GradCommDType::compute);
}

TEST_CASE("the config file reads and writes the typed choices through the same tables") {
  ConfigFile c = parse_config("mixed_precision: fp16\nbackend: nccl\n", "test.yaml");
  CHECK(c.mixed_precision == MixedPrecision::fp16);
  CHECK(c.backend == Backend::nccl);
  CHECK(parse_config(to_yaml(c), "round trip") == c);
  CHECK_THROWS_WITH_AS(parse_config("mixed_precision: fp4\n", "test.yaml"),
                       doctest::Contains("mixed_precision must be one of no, fp16, bf16, fp8, got 'fp4'"), Error);
}

TEST_CASE("deterministic: code, then ACCEL_DETERMINISTIC (1/0/true/false), then off; named on the start-up line once "
          "chosen") {
  AcceleratorOptions o;
  auto env_with = [](const char* value) {
    return EnvironmentVariables{{"ACCEL_CONFIG_FILE", "/nonexistent/accel-test-settings.yaml"},
                                {"ACCEL_DETERMINISTIC", value}};
  };
  EffectiveSettings s = resolve_settings(o, env_with(""));  // empty: unset
  CHECK_FALSE(s.deterministic.value);
  CHECK(s.deterministic.source == "default");
  CHECK(s.describe().find("deterministic") == std::string::npos);  // the default line stays as it was

  s = resolve_settings(o, env_with("1"));
  CHECK(s.deterministic.value);
  CHECK(s.deterministic.source == "environment ACCEL_DETERMINISTIC");
  CHECK(s.describe() ==
        "mixed_precision=no (default), grad_comm_dtype=f32 (default), cpu=false (default), "
        "gradient_accumulation_steps=1 (default), backend=auto (default), bucket_cap_mb=25 (default), "
        "timeout=600s (default), deterministic=true (environment ACCEL_DETERMINISTIC)");
  CHECK(resolve_settings(o, env_with("true")).deterministic.value);
  CHECK_FALSE(resolve_settings(o, env_with("0")).deterministic.value);

  o.deterministic = false;  // code wins over the environment
  s = resolve_settings(o, env_with("1"));
  CHECK_FALSE(s.deterministic.value);
  CHECK(s.deterministic.source == "code");
  CHECK(s.describe().find(", deterministic=false (code)") != std::string::npos);

  o.deterministic.reset();
  CHECK_THROWS_WITH_AS(resolve_settings(o, env_with("yes")),
                       "Accelerator: deterministic 'yes' from environment ACCEL_DETERMINISTIC is not valid; expected "
                       "1, 0, true or false",
                       Error);
}

TEST_CASE("timeout: code, then ACCEL_TIMEOUT, then the config file, then 600 s; always on the start-up line") {
  AcceleratorOptions o;
  auto env_with = [](const char* value) {
    return EnvironmentVariables{{"ACCEL_CONFIG_FILE", "/nonexistent/accel-test-settings.yaml"}, {"ACCEL_TIMEOUT", value}};
  };
  EffectiveSettings s = resolve_settings(o, env_with(""));
  CHECK(s.timeout.value == 600);
  CHECK(s.timeout.source == "default");
  CHECK(s.describe().find(", timeout=600s (default)") != std::string::npos);
  s = resolve_settings(o, env_with("45"));
  CHECK(s.timeout.value == 45);
  CHECK(s.timeout.source == "environment ACCEL_TIMEOUT");
  o.timeout = 7;
  CHECK(resolve_settings(o, env_with("45")).timeout.value == 7);
  o.timeout.reset();
  CHECK_THROWS_WITH_AS(resolve_settings(o, env_with("0")), doctest::Contains("timeout '0' from environment ACCEL_TIMEOUT is not valid"), Error);
  CHECK_THROWS_WITH_AS(resolve_settings(o, env_with("3000000")),
                       doctest::Contains("a whole number of seconds in [1, 2592000]"), Error);
}

TEST_CASE("trace_dir: code, then ACCEL_TRACE; off by default and then absent from the start-up line") {
  AcceleratorOptions o;
  auto env_with = [](const char* value) {
    return EnvironmentVariables{{"ACCEL_CONFIG_FILE", "/nonexistent/accel-test-settings.yaml"}, {"ACCEL_TRACE", value}};
  };
  EffectiveSettings s = resolve_settings(o, env_with(""));
  CHECK(s.trace_dir.value.empty());
  CHECK(s.describe().find("trace=") == std::string::npos);
  s = resolve_settings(o, env_with("/tmp/run7"));
  CHECK(s.trace_dir.value == "/tmp/run7");
  CHECK(s.describe().find(", trace=/tmp/run7 (environment ACCEL_TRACE)") != std::string::npos);
  o.trace_dir = "mine";
  s = resolve_settings(o, env_with("/tmp/run7"));
  CHECK(s.trace_dir.value == "mine");
  CHECK(s.trace_dir.source == "code");
}
