// The check setting (the first-step sanity report) resolves like the others: code, then ACCEL_CHECK,
// then the config file's sanity_check, then off; the settings line names it when it is on.
#include <doctest/doctest.h>

#include "accel.h"
#include "runtime/config_file.h"

using namespace accel;

namespace {
EnvironmentVariables env_of(std::initializer_list<std::pair<const std::string, std::string>> values) {
  EnvironmentVariables env(values);
  env["ACCEL_CONFIG_FILE"] = "/nonexistent/accel-test-check.yaml";
  return env;
}
}  // namespace

TEST_CASE("check: code, then ACCEL_CHECK, then the config file's sanity_check, then off; on the settings line when on") {
  AcceleratorOptions o;
  EffectiveSettings s = resolve_settings(o, env_of({}));
  CHECK_FALSE(s.check.value);
  CHECK(s.check.source == "default");
  CHECK(s.describe().find("check") == std::string::npos);  // the default line stays as it was
  s = resolve_settings(o, env_of({{"ACCEL_CHECK", "1"}}));
  CHECK(s.check.value);
  CHECK(s.describe().find(", check=true (environment ACCEL_CHECK)") != std::string::npos);
  o.check = false;
  CHECK_FALSE(resolve_settings(o, env_of({{"ACCEL_CHECK", "1"}})).check.value);
  o.check = true;
  CHECK(resolve_settings(o, env_of({})).check.source == "code");
  CHECK_THROWS_WITH_AS(resolve_settings(AcceleratorOptions{}, env_of({{"ACCEL_CHECK", "maybe"}})),
                       doctest::Contains("ACCEL_CHECK"), Error);
  CHECK(parse_config("sanity_check: true\n", "t.yaml").sanity_check);
  CHECK_THROWS_WITH_AS(parse_config("sanity_check: sometimes\n", "t.yaml"),
                       "t.yaml:1: sanity_check must be true or false, got 'sometimes'", Error);
  ConfigFile c;
  c.sanity_check = true;
  CHECK(parse_config(to_yaml(c), "round trip") == c);
}
