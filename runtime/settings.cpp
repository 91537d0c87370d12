// Settings resolution: code, then environment, then config file, then default; each value is parsed
// into its type, and a bad one names the setting, the value, where it came from and what is expected.
#include "runtime/settings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <omp.h>

#include <cmath>
#include <filesystem>
#include <functional>

#include "runtime/accelerate_names.h"
#include "runtime/config_file.h"
#include "runtime/process_state.h"
#include "runtime/sharding_plugins.h"
#include "runtime/tracking/tracker_names.h"

namespace accel {

namespace {

using Env = EnvironmentVariables;

std::optional<std::string> lookup(const Env& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? std::nullopt : std::optional<std::string>(it->second);
}

// How one setting is read: its name, variable, the texts code and the config file gave, the default,
// and how a text becomes a value (nullopt: not valid) with the words for what is expected.
template <class T>
struct Rule {
  const char* name;
  const char* env_name;
  std::optional<std::string> code, file;
  std::string fallback;
  std::function<std::optional<T>(const std::string&)> parse;
  std::string expected;
};

template <class T>
Setting<T> resolve(const Rule<T>& rule, const Env& env) {
  std::string text, source;
  if (rule.code) {
    text = *rule.code, source = "code";
  } else if (auto v = setting_variable(env, rule.env_name)) {
    text = v->value, source = fmt::format("environment {}", v->name);
  } else if (rule.file) {
    text = *rule.file, source = "config file";
  } else {
    text = rule.fallback, source = "default";
  }
  const std::optional<T> value = rule.parse(text);
  if (!value)
    throw Error(fmt::format("Accelerator: {} '{}' from {} is not valid; expected {}", rule.name, text, source,
                            rule.expected));
  return {*value, source};
}

// A name from an enum's table that is available now.
template <class E, size_t N>
std::function<std::optional<E>(const std::string&)> choice_of(const std::array<NamedValue<E>, N>& table) {
  return [&table](const std::string& text) -> std::optional<E> {
    const std::optional<E> value = value_in(table, text);
    if (value && available_in(table, *value)) return value;
    return std::nullopt;
  };
}

std::optional<bool> parse_bool(const std::string& s) {
  if (s == "true") return true;
  if (s == "false") return false;
  return std::nullopt;
}

// A switch given as a word or as a digit, as ACCEL_DETERMINISTIC=1 reads.
std::optional<bool> parse_switch(const std::string& s) {
  if (s == "1") return true;
  if (s == "0") return false;
  return parse_bool(s);
}

std::optional<int> parse_positive_int(const std::string& s) {
  try {
    size_t used = 0;
    const int v = std::stoi(s, &used);
    if (v >= 1 && used == s.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::optional<int> parse_timeout(const std::string& s) {
  const std::optional<int> seconds = parse_positive_int(s);
  if (!seconds || *seconds > kMaxTimeoutSeconds) return std::nullopt;
  return seconds;
}

std::optional<double> parse_positive_number(const std::string& s) {
  try {
    size_t used = 0;
    const double v = std::stod(s, &used);
    if (used == s.size() && std::isfinite(v) && v > 0) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

template <class E>
std::optional<std::string> text_of(const std::optional<Choice<E>>& choice) {
  return choice ? std::optional<std::string>(choice->text()) : std::nullopt;
}

std::optional<ConfigFile> read_config_file(const AcceleratorOptions& o, const Env& env, std::string& path) {
  if (o.config_file) {
    path = *o.config_file;
    return load_config(path);  // asked for by name: a missing file is an error
  }
  path = lookup(env, "ACCEL_CONFIG_FILE").value_or(default_config_path());
  if (std::filesystem::exists(path)) return load_config(path);
  return std::nullopt;
}

std::optional<int> parse_zero_stage(const std::string& s) {
  if (s.size() == 1 && s[0] >= '0' && s[0] <= '3') return s[0] - '0';
  return std::nullopt;
}

// The ZeRO stage and FSDP's units from the plugins given in code, else ACCEL_ZERO_STAGE or
// ACCEL_FSDP_SHARDING_STRATEGY (set by `accel launch --use_deepspeed / --use_fsdp`), else 0.
void resolve_sharding(const AcceleratorOptions& o, const Env& env, const std::optional<ConfigFile>& file,
                      EffectiveSettings& s) {
  // ACCEL_* or Accelerate's names for them (ACCELERATE_DEEPSPEED_ZERO_STAGE, FSDP_SHARDING_STRATEGY).
  const std::optional<EnvironmentValue> stage_var = setting_variable(env, "ACCEL_ZERO_STAGE");
  const std::optional<EnvironmentValue> fsdp_var = setting_variable(env, "ACCEL_FSDP_SHARDING_STRATEGY");
  const std::optional<std::string> env_stage = stage_var ? std::optional(stage_var->value) : std::nullopt;
  const std::optional<std::string> env_fsdp = fsdp_var ? std::optional(fsdp_var->value) : std::nullopt;
  if (o.deepspeed_plugin && o.fsdp_plugin)
    throw Error(fmt::format("Accelerator: deepspeed_plugin (zero_stage {}) and fsdp_plugin (sharding_strategy {}) "
                            "were both given; give one of them",
                            o.deepspeed_plugin->zero_stage, name_of(o.fsdp_plugin->sharding_strategy)));
  if (!o.deepspeed_plugin && !o.fsdp_plugin && env_stage && env_fsdp)
    throw Error(fmt::format("Accelerator: ACCEL_ZERO_STAGE={} and ACCEL_FSDP_SHARDING_STRATEGY={} were both set; "
                            "set one of them (--use_deepspeed or --use_fsdp)",
                            *env_stage, *env_fsdp));
  std::optional<ShardingStrategy> fsdp;
  std::string text = "0", source = "default";
  if (o.deepspeed_plugin) {
    text = std::to_string(o.deepspeed_plugin->zero_stage), source = "code", s.sharding_via = "deepspeed";
  } else if (o.fsdp_plugin) {
    fsdp = o.fsdp_plugin->sharding_strategy, source = "code", s.sharding_via = "fsdp";
  } else if (env_stage) {
    text = *env_stage, source = "environment " + stage_var->name, s.sharding_via = "deepspeed";
  } else if (env_fsdp) {
    fsdp = value_in(kShardingStrategyNames, *env_fsdp), source = "environment " + fsdp_var->name;
    s.sharding_via = "fsdp";
    if (!fsdp)
      throw Error(fmt::format("Accelerator: fsdp_sharding_strategy '{}' from {} is not valid; expected {}", *env_fsdp,
                              source, available_choices(kShardingStrategyNames)));
  } else if (file && file->zero_stage != 0) {
    text = std::to_string(file->zero_stage), source = "config file", s.sharding_via = "deepspeed";
  } else if (file && !file->fsdp_sharding_strategy.empty()) {
    fsdp = value_in(kShardingStrategyNames, file->fsdp_sharding_strategy), source = "config file";
    s.sharding_via = "fsdp";
  }
  if (fsdp) {
    text = std::to_string(zero_stage_of(*fsdp));
    s.hybrid_shard = is_hybrid(*fsdp);
    s.fsdp_strategy = fsdp;
  }
  const std::optional<int> stage = parse_zero_stage(text);
  if (!stage)
    throw Error(fmt::format("Accelerator: zero_stage '{}' from {} is not valid; expected 0, 1, 2 or 3", text, source));
  s.zero_stage = {*stage, fsdp ? fmt::format("{}, sharding_strategy {}", source, name_of(*fsdp)) : source};
}

// Stage 3's units: FSDPPlugin's auto_wrap when the plugin is given in code; else
// ACCEL_FSDP_TRANSFORMER_CLS_TO_WRAP (module type names, comma-separated) and ACCEL_FSDP_MIN_NUM_PARAMS
// (or Accelerate's FSDP_* names), either or both; else the config file's; else every module that
// owns parameters. Given for a sharding other than stage 3 it is an error naming both.
void resolve_auto_wrap(const AcceleratorOptions& o, const Env& env, const std::optional<ConfigFile>& file,
                       EffectiveSettings& s) {
  s.auto_wrap = {AutoWrapPolicy{}, "default"};
  if (o.fsdp_plugin) {
    s.auto_wrap = {o.fsdp_plugin->auto_wrap, "code"};
    return;  // the plugin's sharding strategy and units come together
  }
  const std::optional<EnvironmentValue> types = setting_variable(env, "ACCEL_FSDP_TRANSFORMER_CLS_TO_WRAP");
  const std::optional<EnvironmentValue> count = setting_variable(env, "ACCEL_FSDP_MIN_NUM_PARAMS");
  AutoWrapPolicy policy;
  std::vector<std::string> sources;
  if (types) {
    const std::optional<std::vector<std::string>> names = parse_module_types(types->value);
    if (!names)
      throw Error(fmt::format("Accelerator: fsdp_transformer_layer_cls_to_wrap '{}' from environment {} is not valid; "
                              "expected {}",
                              types->value, types->name, kModuleTypesExpected));
    policy.module_types = *names;
    sources.push_back("environment " + types->name);
  }
  if (count) {
    const std::optional<int> n = parse_positive_int(count->value);
    if (!n)
      throw Error(fmt::format("Accelerator: fsdp_min_num_params '{}' from environment {} is not valid; expected an "
                              "integer >= 1",
                              count->value, count->name));
    policy.min_num_params = *n;
    sources.push_back("environment " + count->name);
  }
  if (sources.empty() && file && (!file->fsdp_transformer_layer_cls_to_wrap.empty() || file->fsdp_min_num_params > 0)) {
    policy = {file->fsdp_transformer_layer_cls_to_wrap, file->fsdp_min_num_params};
    sources.push_back("config file");
  }
  if (sources.empty()) return;
  s.auto_wrap = {policy, fmt::format("{}", fmt::join(sources, ", "))};
  if (s.zero_stage.value != 3)
    throw Error(fmt::format("Accelerator: auto_wrap {} ({}) chooses stage 3's units, but the sharding is zero_stage {} "
                            "({}); give FULL_SHARD or HYBRID_SHARD (or zero_stage 3), or leave it out",
                            policy.describe(), s.auto_wrap.source, s.zero_stage.value, s.zero_stage.source));
}

// Stage 3's reshard_after_forward: FSDPPlugin's when the plugin is given in code; else
// ACCEL_FSDP_RESHARD_AFTER_FORWARD (or FSDP_RESHARD_AFTER_FORWARD under ACCELERATE_USE_FSDP); else the
// config file's false; else true. HYBRID_SHARD_ZERO2 is HYBRID_SHARD with it false. False given for a
// sharding other than stage 3, or true with HYBRID_SHARD_ZERO2, is an error naming both.
void resolve_reshard_after_forward(const AcceleratorOptions& o, const Env& env, const std::optional<ConfigFile>& file,
                                   EffectiveSettings& s) {
  const bool file_says_false = file && !file->fsdp_reshard_after_forward;
  s.reshard_after_forward = resolve<bool>(
      {"reshard_after_forward", "ACCEL_FSDP_RESHARD_AFTER_FORWARD",
       o.fsdp_plugin ? std::optional<std::string>(o.fsdp_plugin->reshard_after_forward ? "true" : "false")
                     : std::nullopt,
       file_says_false ? std::optional<std::string>("false") : std::nullopt, "true", parse_switch,
       "1, 0, true or false"},
      env);
  const bool zero2_hybrid = s.fsdp_strategy == ShardingStrategy::hybrid_shard_zero2;
  const bool named = s.reshard_after_forward.source != "default" && s.reshard_after_forward.source != "code";
  if (zero2_hybrid && named && s.reshard_after_forward.value)
    throw Error(fmt::format("Accelerator: reshard_after_forward true ({}) contradicts zero_stage 3 ({}), which keeps "
                            "the units gathered from forward to backward; give HYBRID_SHARD, or leave "
                            "reshard_after_forward out",
                            s.reshard_after_forward.source, s.zero_stage.source));
  if (zero2_hybrid) s.reshard_after_forward = {false, s.zero_stage.source};
  if (named && !s.reshard_after_forward.value && s.zero_stage.value != 3)
    throw Error(fmt::format("Accelerator: reshard_after_forward false ({}) is for stage 3, whose parameters are "
                            "sharded, but the sharding is zero_stage {} ({}); give FULL_SHARD or HYBRID_SHARD (or "
                            "zero_stage 3), or leave it out",
                            s.reshard_after_forward.source, s.zero_stage.value, s.zero_stage.source));
}

std::optional<int> parse_non_negative_int(const std::string& s) {
  if (s == "0") return 0;
  return parse_positive_int(s);
}

// HYBRID_SHARD's ranks per shard group: FSDPPlugin's hybrid_shard_size (0 there: not given), else
// ACCEL_FSDP_HYBRID_SHARD_SIZE, else the config file's, else 0 (one node's ranks). Given for another
// strategy it is an error naming both.
void resolve_hybrid_shard_size(const AcceleratorOptions& o, const Env& env, const std::optional<ConfigFile>& file,
                               EffectiveSettings& s) {
  const bool in_code = o.fsdp_plugin && o.fsdp_plugin->hybrid_shard_size != 0;
  const bool in_file = file && file->fsdp_hybrid_shard_size != 0;
  s.hybrid_shard_size = resolve<int>(
      {"hybrid_shard_size", "ACCEL_FSDP_HYBRID_SHARD_SIZE",
       in_code ? std::optional(std::to_string(o.fsdp_plugin->hybrid_shard_size)) : std::nullopt,
       in_file ? std::optional(std::to_string(file->fsdp_hybrid_shard_size)) : std::nullopt, "0",
       parse_non_negative_int, "an integer >= 0 (ranks per HYBRID_SHARD shard group; 0: the ranks of one node)"},
      env);
  if (s.hybrid_shard_size.value != 0 && !s.hybrid_shard)
    throw Error(fmt::format("Accelerator: hybrid_shard_size {} ({}) is for sharding_strategy HYBRID_SHARD, but the "
                            "sharding is zero_stage {} ({}); give sharding_strategy HYBRID_SHARD or leave "
                            "hybrid_shard_size out",
                            s.hybrid_shard_size.value, s.hybrid_shard_size.source, s.zero_stage.value,
                            s.zero_stage.source));
}

// DeepSpeedPlugin's gradient_accumulation_steps stands for the option in code; both, differently, is
// an error naming both.
std::optional<int> accumulation_in_code(const AcceleratorOptions& o) {
  const std::optional<int> plugin =
      o.deepspeed_plugin ? o.deepspeed_plugin->gradient_accumulation_steps : std::optional<int>();
  if (plugin && o.gradient_accumulation_steps && *plugin != *o.gradient_accumulation_steps)
    throw Error(fmt::format("Accelerator: gradient_accumulation_steps {} and DeepSpeedPlugin's "
                            "gradient_accumulation_steps {} differ; give one of them",
                            *o.gradient_accumulation_steps, *plugin));
  return o.gradient_accumulation_steps ? o.gradient_accumulation_steps : plugin;
}

// The built-in tracker names in code, as one comma-separated text, or nullopt when code names none.
std::optional<std::string> tracker_names_in_code(const AcceleratorOptions& o) {
  std::vector<std::string> names;
  for (const TrackerChoice& choice : o.log_with)
    if (!choice.tracker()) names.push_back(choice.name());
  if (names.empty()) return std::nullopt;
  return fmt::format("{}", fmt::join(names, ","));
}

void resolve_trackers(const AcceleratorOptions& o, const Env& env, const std::optional<ConfigFile>& file,
                      EffectiveSettings& s) {
  std::optional<std::string> from_file;
  if (file && !file->log_with.empty()) from_file = fmt::format("{}", fmt::join(file->log_with, ","));
  s.log_with = resolve<std::vector<std::string>>(
      {"log_with", "ACCEL_LOG_WITH", tracker_names_in_code(o), from_file, "",
       [](const std::string& text) -> std::optional<std::vector<std::string>> {
         const auto names = parse_tracker_list(text);
         return names ? std::optional(expand_tracker_names(*names)) : std::nullopt;
       },
       fmt::format("a comma-separated list of {} (or Tracker objects in code)", tracker_choices())},
      env);
  for (const TrackerChoice& choice : o.log_with)
    if (choice.tracker()) s.user_trackers.push_back(choice.tracker()->name());
}

// Each field from the recipe in code (whole), else its ACCEL_FP8_* variable, the config file, TE's default.
void resolve_fp8(const AcceleratorOptions& o, const Env& env, const std::optional<ConfigFile>& file,
                 EffectiveSettings& s) {
  const fp8::RecipeOptions defaults;
  const std::optional<fp8::RecipeOptions>& code = o.fp8_recipe;
  auto text = [&](auto field) -> std::optional<std::string> {
    return code ? std::optional<std::string>(field(*code)) : std::nullopt;
  };
  auto in_file = [&](auto field) -> std::optional<std::string> {
    return file ? std::optional<std::string>(field(*file)) : std::nullopt;
  };
  auto word = [](bool b) { return std::string(b ? "true" : "false"); };
  using Recipe = fp8::RecipeOptions;
  Fp8RecipeSettings& f = s.fp8;
  f.from_code = code.has_value();
  f.margin = resolve<int>({"fp8 margin", "ACCEL_FP8_MARGIN", text([](const Recipe& r) { return std::to_string(r.margin); }),
                           in_file([](const ConfigFile& c) { return std::to_string(c.fp8_margin); }),
                           std::to_string(defaults.margin), parse_non_negative_int, "an integer >= 0"},
                          env);
  f.amax_history_len = resolve<int>(
      {"fp8 amax_history_len", "ACCEL_FP8_AMAX_HISTORY_LEN",
       text([](const Recipe& r) { return std::to_string(r.amax_history_len); }),
       in_file([](const ConfigFile& c) { return std::to_string(c.fp8_amax_history_len); }),
       std::to_string(defaults.amax_history_len), parse_positive_int, "an integer >= 1 (steps of amax kept)"},
      env);
  f.amax_compute_algo = resolve<fp8::AmaxAlgorithm>(
      {"fp8 amax_compute_algo", "ACCEL_FP8_AMAX_COMPUTE_ALGO",
       text([](const Recipe& r) { return std::string(name_in(fp8::kAmaxAlgorithmNames, r.amax_compute_algo)); }),
       in_file([](const ConfigFile& c) { return std::string(name_in(fp8::kAmaxAlgorithmNames, c.fp8_amax_compute_algo)); }),
       name_in(fp8::kAmaxAlgorithmNames, defaults.amax_compute_algo), choice_of(fp8::kAmaxAlgorithmNames),
       available_choices(fp8::kAmaxAlgorithmNames)},
      env);
  f.format = resolve<fp8::Format>(
      {"fp8 format", "ACCEL_FP8_FORMAT",
       text([](const Recipe& r) { return std::string(name_in(fp8::kFormatNames, r.format)); }),
       in_file([](const ConfigFile& c) { return std::string(name_in(fp8::kFormatNames, c.fp8_format)); }),
       name_in(fp8::kFormatNames, defaults.format), choice_of(fp8::kFormatNames), available_choices(fp8::kFormatNames)},
      env);
  f.include_first_last = resolve<bool>(
      {"fp8 include_first_last", "ACCEL_FP8_INCLUDE_FIRST_LAST",
       text([&](const Recipe& r) { return word(r.include_first_last); }),
       in_file([&](const ConfigFile& c) { return word(c.fp8_include_first_last); }), word(defaults.include_first_last),
       parse_switch, "1, 0, true or false"},
      env);
  // Not a config file key: whether this run may emulate FP8 on the GPU it got.
  f.allow_emulation = resolve<bool>({"fp8 allow_emulation", "ACCEL_FP8_EMULATION",
                                     text([&](const Recipe& r) { return word(r.allow_emulation); }), std::nullopt,
                                     word(defaults.allow_emulation), parse_switch, "1, 0, true or false"},
                                    env);
}

// ", log_with=jsonl,mine (code)", or nothing when no tracker is asked for.
std::string describe_trackers(const EffectiveSettings& s) {
  std::vector<std::string> names = s.log_with.value;
  names.insert(names.end(), s.user_trackers.begin(), s.user_trackers.end());
  if (names.empty()) return "";
  const std::string source = s.log_with.value.empty() ? "code" : s.log_with.source;
  return fmt::format(", log_with={} ({})", fmt::join(names, ","), source);
}

// ", auto_wrap=GPTBlock (code)" under stage 3 when the units were chosen, else nothing.
std::string describe_auto_wrap(const EffectiveSettings& s) {
  if (s.zero_stage.value != 3 || s.auto_wrap.value.is_default()) return "";
  return fmt::format(", auto_wrap={} ({})", s.auto_wrap.value.describe(), s.auto_wrap.source);
}

// ", reshard_after_forward=false (code)" under stage 3 when the units stay gathered, else nothing.
std::string describe_reshard(const EffectiveSettings& s) {
  if (s.zero_stage.value != 3 || s.reshard_after_forward.value) return "";
  return fmt::format(", reshard_after_forward=false ({})", s.reshard_after_forward.source);
}

// ", hybrid_shard_size=2 (code)" under HYBRID_SHARD, else nothing.
std::string describe_hybrid_shard(const EffectiveSettings& s) {
  if (!s.hybrid_shard) return "";
  const int size = s.hybrid_shard_size.value;
  return fmt::format(", hybrid_shard_size={} ({})", size == 0 ? "node" : std::to_string(size), s.hybrid_shard_size.source);
}

}  // namespace

fp8::RecipeOptions Fp8RecipeSettings::recipe() const {
  return {.margin = margin.value,
          .amax_history_len = amax_history_len.value,
          .amax_compute_algo = amax_compute_algo.value,
          .format = format.value,
          .include_first_last = include_first_last.value,
          .allow_emulation = allow_emulation.value};
}

std::string Fp8RecipeSettings::describe() const {
  std::vector<std::string> sources;
  for (const std::string* source : {&margin.source, &amax_history_len.source, &amax_compute_algo.source,
                                    &format.source, &include_first_last.source, &allow_emulation.source})
    if (std::find(sources.begin(), sources.end(), *source) == sources.end()) sources.push_back(*source);
  return fmt::format("{}{} ({})", recipe().describe(), allow_emulation.value ? ", emulation allowed" : "",
                     fmt::join(sources, ", "));
}

std::string EffectiveSettings::describe() const {
  return fmt::format(
      "mixed_precision={} ({}), grad_comm_dtype={} ({}), cpu={} ({}), gradient_accumulation_steps={} ({}), "
      "backend={} ({}), bucket_cap_mb={} ({}), timeout={}s ({}){}{}{}{}{}{}{}{}{}",
      name_of(mixed_precision.value), mixed_precision.source, name_of(grad_comm_dtype.value), grad_comm_dtype.source,
      cpu.value, cpu.source, gradient_accumulation_steps.value, gradient_accumulation_steps.source,
      name_of(backend.value), backend.source, bucket_cap_mb.value, bucket_cap_mb.source, timeout.value, timeout.source,
      // Named once chosen: a start-up line without it means the default, off.
      deterministic.source == "default"
          ? ""
          : fmt::format(", deterministic={} ({})", deterministic.value, deterministic.source),
      debug.value ? fmt::format(", debug=true ({})", debug.source) : "",
      check.value ? fmt::format(", check=true ({})", check.source) : "",
      trace_dir.value.empty() ? "" : fmt::format(", trace={} ({})", trace_dir.value, trace_dir.source),
      mixed_precision.value == MixedPrecision::fp8 ? fmt::format(", fp8_recipe={}", fp8.describe()) : "",
      zero_stage.value == 0 ? "" : fmt::format(", zero_stage={} ({}){}{}{}", zero_stage.value, zero_stage.source,
                                               describe_auto_wrap(*this), describe_reshard(*this),
                                               describe_hybrid_shard(*this)),
      tp_size.value == 1 ? "" : fmt::format(", tp_size={} ({})", tp_size.value, tp_size.source),
      describe_trackers(*this),
      config_path.empty() ? "" : fmt::format(", config file {}", config_path));
}

EffectiveSettings resolve_settings(const AcceleratorOptions& o, const Env& env) {
  std::string path;
  const std::optional<ConfigFile> file = read_config_file(o, env, path);
  auto from_file = [&](auto member) -> std::optional<std::string> {
    if (!file) return std::nullopt;
    return member(*file);
  };
  EffectiveSettings s;
  if (file) s.config_path = path;
  s.mixed_precision = resolve<MixedPrecision>(
      {"mixed_precision", "ACCEL_MIXED_PRECISION", text_of(o.mixed_precision),
       from_file([](const ConfigFile& c) { return std::string(name_of(c.mixed_precision)); }), "no",
       choice_of(kMixedPrecisionNames), available_choices(kMixedPrecisionNames)},
      env);
  s.grad_comm_dtype = resolve<GradCommDType>({"grad_comm_dtype", "ACCEL_GRAD_COMM_DTYPE", text_of(o.grad_comm_dtype),
                                              std::nullopt, "f32", choice_of(kGradCommDTypeNames),
                                              available_choices(kGradCommDTypeNames)},
                                             env);
  s.cpu = resolve<bool>({"cpu", "ACCEL_USE_CPU", o.cpu ? std::optional<std::string>(*o.cpu ? "true" : "false") : std::nullopt,
                         from_file([](const ConfigFile& c) { return std::string(c.use_cpu ? "true" : "false"); }),
                         "false", parse_bool, "true or false"},
                        env);
  s.gradient_accumulation_steps = resolve<int>(
      {"gradient_accumulation_steps", "ACCEL_GRADIENT_ACCUMULATION_STEPS",
       accumulation_in_code(o) ? std::optional<std::string>(std::to_string(*accumulation_in_code(o)))
                               : std::nullopt,
       from_file([](const ConfigFile& c) { return std::to_string(c.gradient_accumulation_steps); }), "1",
       parse_positive_int, "an integer >= 1"},
      env);
  s.backend = resolve<Backend>({"backend", "ACCEL_BACKEND", text_of(o.backend),
                                from_file([](const ConfigFile& c) { return std::string(name_of(c.backend)); }), "auto",
                                choice_of(kBackendNames), available_choices(kBackendNames)},
                               env);
  // Not a config file key: a tuning knob, set in code or for one run through the environment.
  s.bucket_cap_mb = resolve<double>(
      {"bucket_cap_mb", "ACCEL_BUCKET_CAP_MB",
       o.bucket_cap_mb ? std::optional<std::string>(fmt::format("{}", *o.bucket_cap_mb)) : std::nullopt,
       std::nullopt, "25", parse_positive_number, "a number of MiB > 0"},
      env);
  // Not a config file key either: a property of one run (a reproduction, a comparison of ranks or
  // machines), asked for in code or for that run through the environment.
  s.deterministic = resolve<bool>(
      {"deterministic", "ACCEL_DETERMINISTIC",
       o.deterministic ? std::optional<std::string>(*o.deterministic ? "true" : "false") : std::nullopt, std::nullopt,
       "false", parse_switch, "1, 0, true or false"},
      env);
  s.debug = resolve<bool>(
      {"debug", "ACCEL_DEBUG", o.debug ? std::optional<std::string>(*o.debug ? "true" : "false") : std::nullopt,
       from_file([](const ConfigFile& c) { return std::string(c.debug ? "true" : "false"); }), "false", parse_switch,
       "1, 0, true or false"},
      env);
  s.timeout = resolve<int>(
      {"timeout", "ACCEL_TIMEOUT", o.timeout ? std::optional<std::string>(std::to_string(*o.timeout)) : std::nullopt,
       from_file([](const ConfigFile& c) { return std::to_string(c.timeout); }), std::to_string(kDefaultTimeoutSeconds),
       parse_timeout, fmt::format("a whole number of seconds in [1, {}]", kMaxTimeoutSeconds)},
      env);
  s.check = resolve<bool>(
      {"check", "ACCEL_CHECK", o.check ? std::optional<std::string>(*o.check ? "true" : "false") : std::nullopt,
       from_file([](const ConfigFile& c) { return std::string(c.sanity_check ? "true" : "false"); }), "false",
       parse_switch, "1, 0, true or false"},
      env);
  s.trace_dir = resolve<std::string>(
      {"trace_dir", "ACCEL_TRACE", o.trace_dir, std::nullopt, "",
       [](const std::string& dir) { return std::optional<std::string>(dir); }, "a directory"},
      env);
  resolve_fp8(o, env, file, s);
  resolve_sharding(o, env, file, s);
  resolve_auto_wrap(o, env, file, s);
  resolve_reshard_after_forward(o, env, file, s);
  resolve_hybrid_shard_size(o, env, file, s);
  // Under ZeRO with bf16/fp16 the grads are 16-bit, and by default they travel so, as DeepSpeed's
  // communication_data_type and FSDP's reduce_dtype do; a grad_comm_dtype f32 given anywhere
  // reduce-scatters them in f32 (docs/zero.md).
  const bool sixteen_bit = s.mixed_precision.value == MixedPrecision::bf16 || s.mixed_precision.value == MixedPrecision::fp16;
  if (s.zero_stage.value > 0 && sixteen_bit && s.grad_comm_dtype.source == "default")
    s.grad_comm_dtype = {GradCommDType::compute, "default under ZeRO with bf16/fp16"};
  const std::optional<ParallelismConfig>& parallel = o.parallelism_config;
  if (parallel && parallel->dp_size < 0)
    throw Error(fmt::format("Accelerator: ParallelismConfig dp_size {} must be 0 (the world / tp_size) or positive",
                            parallel->dp_size));
  s.tp_size = resolve<int>(
      {"tp_size", "ACCEL_TP_SIZE", parallel ? std::optional(std::to_string(parallel->tp_size)) : std::nullopt,
       from_file([](const ConfigFile& c) { return std::to_string(c.tp_size); }), "1", parse_positive_int,
       "an integer >= 1 (ranks per tensor-parallel group)"},
      env);
  s.dp_size = parallel ? parallel->dp_size : 0;
  resolve_trackers(o, env, file, s);
  s.cpu_threads = {omp_get_max_threads(),
                   lookup(env, "OMP_NUM_THREADS") ? "environment OMP_NUM_THREADS" : "OpenMP default"};
  s.alias_notes = accelerate_alias_notes(env);
  return s;
}

}  // namespace accel
