// The config file: round trip, defaults, and errors that name the key and the line.
#include <doctest/doctest.h>

#include <filesystem>

#include "accel.h"
#include "runtime/config_file.h"

using namespace accel;

TEST_CASE("to_yaml and parse_config round-trip every field") {
  ConfigFile c;
  c.environment = "hosts";
  c.num_machines = 2;
  c.num_processes = 8;
  c.machine_rank = 1;
  c.main_process_ip = "10.0.0.1";
  c.main_process_port = 1234;
  c.hostfile = "/tmp/hosts";
  c.mixed_precision = MixedPrecision::bf16;
  c.gradient_accumulation_steps = 4;
  c.use_cpu = true;
  c.backend = Backend::ring;
  CHECK(parse_config(to_yaml(c), "test") == c);
  CHECK(parse_config("", "empty") == ConfigFile{});
}

TEST_CASE("save_config writes where load_config reads") {
  const auto path = std::filesystem::temp_directory_path() / "accel_test_config" / "config.yaml";
  ConfigFile c;
  c.num_processes = 3;
  save_config(c, path.string());
  CHECK(load_config(path.string()) == c);
  std::filesystem::remove_all(path.parent_path());
}

TEST_CASE("an unknown key or a bad value names the key and the line") {
  CHECK_THROWS_WITH_AS(parse_config("num_processes: 2\nmixed_precison: fp16\n", "cfg.yaml"),
                       doctest::Contains("cfg.yaml:2: unknown key 'mixed_precison' (known keys: backend,"), Error);
  CHECK_THROWS_WITH_AS(parse_config("num_processes: 2\n\nmixed_precision: fp8\n", "cfg.yaml"),
                       "cfg.yaml:3: mixed_precision must be one of no, fp16, bf16, got 'fp8'", Error);
  CHECK_THROWS_WITH_AS(parse_config("num_processes: zero\n", "cfg.yaml"),
                       "cfg.yaml:1: num_processes must be an integer >= 1, got 'zero'", Error);
  CHECK_THROWS_WITH_AS(parse_config("use_cpu: maybe\n", "cfg.yaml"), "cfg.yaml:1: use_cpu must be true or false, got 'maybe'", Error);
  CHECK_THROWS_WITH_AS(parse_config("- a\n- b\n", "cfg.yaml"), "cfg.yaml:1: expected a mapping of keys to values", Error);
  CHECK_THROWS_WITH_AS(parse_config("num_processes: [1\n", "cfg.yaml"), doctest::Contains("not valid YAML"), Error);
  CHECK_THROWS_WITH_AS(parse_config("num_machines: 2\nmachine_rank: 2\nenvironment: hosts\nnum_processes: 2\n", "cfg.yaml"),
                       "cfg.yaml: machine_rank 2 must be below num_machines 2", Error);
  CHECK_THROWS_WITH_AS(load_config("/nonexistent/accel.yaml"), "load_config: cannot open '/nonexistent/accel.yaml'", Error);
}
