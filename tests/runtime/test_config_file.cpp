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
  CHECK_THROWS_WITH_AS(parse_config("num_processes: 2\n\nmixed_precision: fp4\n", "cfg.yaml"),
                       "cfg.yaml:3: mixed_precision must be one of no, fp16, bf16, fp8, got 'fp4'", Error);
  CHECK_THROWS_WITH_AS(parse_config("num_processes: zero\n", "cfg.yaml"),
                       "cfg.yaml:1: num_processes must be an integer >= 1, got 'zero'", Error);
  CHECK_THROWS_WITH_AS(parse_config("use_cpu: maybe\n", "cfg.yaml"), "cfg.yaml:1: use_cpu must be true or false, got 'maybe'", Error);
  CHECK_THROWS_WITH_AS(parse_config("- a\n- b\n", "cfg.yaml"), "cfg.yaml:1: expected a mapping of keys to values", Error);
  CHECK_THROWS_WITH_AS(parse_config("num_processes: [1\n", "cfg.yaml"), doctest::Contains("not valid YAML"), Error);
  CHECK_THROWS_WITH_AS(parse_config("num_machines: 2\nmachine_rank: 2\nenvironment: hosts\nnum_processes: 2\n", "cfg.yaml"),
                       "cfg.yaml: machine_rank 2 must be below num_machines 2", Error);
  CHECK_THROWS_WITH_AS(load_config("/nonexistent/accel.yaml"), "load_config: cannot open '/nonexistent/accel.yaml'", Error);
}

TEST_CASE("ports, process and machine counts out of range, and a key given twice, are refused") {
  CHECK_THROWS_WITH_AS(parse_config("main_process_port: 70000\n", "cfg.yaml"),
                       "cfg.yaml:1: main_process_port must be at most 65535, got 70000", Error);
  CHECK(parse_config("main_process_port: 65535\n", "cfg.yaml").main_process_port == 65535);
  CHECK_THROWS_WITH_AS(parse_config("num_processes: 2147483647\n", "cfg.yaml"),
                       "cfg.yaml:1: num_processes must be at most 1048576, got 2147483647", Error);
  CHECK_THROWS_WITH_AS(parse_config("num_machines: 2000000\n", "cfg.yaml"),
                       "cfg.yaml:1: num_machines must be at most 1048576, got 2000000", Error);
  CHECK_THROWS_WITH_AS(parse_config("num_processes: 2\nmixed_precision: bf16\nnum_processes: 4\n", "cfg.yaml"),
                       "cfg.yaml:3: key 'num_processes' appears twice", Error);
  // Values set by the launcher's flags go through the same bounds.
  ConfigFile flags;
  flags.num_processes = 2147483647;
  CHECK_THROWS_WITH_AS(validate_config(flags, "accel launch"),
                       "accel launch: num_processes 2147483647 and num_machines 1 must be from 1 to 1048576", Error);
  flags.num_processes = 2;
  flags.main_process_port = 70000;
  CHECK_THROWS_WITH_AS(validate_config(flags, "accel launch"), "accel launch: main_process_port 70000 must be from 1 to 65535",
                       Error);
}

TEST_CASE("to_yaml writes quotes, backslashes and control characters so that they read back (found by fuzzing)") {
  ConfigFile c;
  c.hostfile = "C:\\new\ttab\x01 \"q\"";
  c.main_process_ip = "a\\b\nc";
  const ConfigFile back = parse_config(to_yaml(c), "written.yaml");
  CHECK(back.hostfile == c.hostfile);
  CHECK(back.main_process_ip == c.main_process_ip);
}
