// The parts of the CLI's Accelerate words that need no process: OMP_NUM_THREADS per rank, the nearest
// command by edit distance, GPT-2's parameter counts, `accel config update`, and the free port pick.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "kernels/error.h"
#include "runtime/cli/command_suggestion.h"
#include "runtime/cli/config_command.h"
#include "runtime/cli/estimate_memory_command.h"
#include "runtime/cli/free_port.h"
#include "runtime/cli/launch.h"
#include "runtime/config_file.h"

using namespace accel;

TEST_CASE("OMP_NUM_THREADS per rank: the flag, else the user's value, else usable CPUs / ranks per machine") {
  LaunchRequest request;
  request.config.num_processes = 2;
  CHECK(cpu_threads_per_process(request, HostFacts{16, false, 8}) == "4");  // the affinity mask, not all cores
  CHECK(cpu_threads_per_process(request, HostFacts{16, false, 0}) == "8");  // no mask known: the cores
  request.config.num_processes = 3;
  CHECK(cpu_threads_per_process(request, HostFacts{8, false, 8}) == "2");  // rounded down
  request.config.num_processes = 16;
  CHECK(cpu_threads_per_process(request, HostFacts{8, false, 8}) == "1");  // at least one
  request.config.num_machines = 4;  // 4 ranks a machine
  request.config.environment = "hosts";
  CHECK(cpu_threads_per_process(request, HostFacts{8, false, 8}) == "2");
  request.user_omp_num_threads = "6";
  CHECK(cpu_threads_per_process(request, HostFacts{8, false, 8}) == "6");
  request.num_cpu_threads_per_process = 3;
  CHECK(cpu_threads_per_process(request, HostFacts{8, false, 8}) == "3");
}

TEST_CASE("the mpirun line exports OMP_NUM_THREADS after the settings, ACCEL_DEBUG with debug, the port when given") {
  LaunchRequest request;
  request.config.num_processes = 2;
  request.config.debug = true;
  request.program = "./train";
  request.self_path = "/bin/accel";
  request.export_main_process_port = true;
  request.config.main_process_port = 4321;
  CHECK(shell_join(mpirun_command(request, HostFacts{4, false, 4})) ==
        "mpirun -np 2 -x ACCEL_MIXED_PRECISION=no -x ACCEL_GRADIENT_ACCUMULATION_STEPS=1 -x ACCEL_USE_CPU=false "
        "-x ACCEL_BACKEND=auto -x ACCEL_DEBUG=1 -x ACCEL_MAIN_PROCESS_PORT=4321 -x OMP_NUM_THREADS=2 /bin/accel "
        "exec-rank -- ./train");
}

TEST_CASE("a mistyped command is named with the nearest by edit distance") {
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("launch", "launch") == 0);
  CHECK(edit_distance("lanch", "launch") == 1);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(nearest_name("lunch", {"config", "launch", "env", "test"}) == "launch");
  CHECK(nearest_name("tets", {"config", "launch", "env", "test"}) == "test");
  CHECK(nearest_name("estimate", {"config", "estimate-memory", "env"}) == "estimate-memory");
  CHECK_NOTHROW(check_command_name("accel", "env", {"env", "test"}));
  CHECK_THROWS_WITH_AS(check_command_name("accel", "evn", {"env", "test"}),
                       "accel: unknown command 'evn'; did you mean env? (commands: env, test)", Error);
}

TEST_CASE("GPT-2's parameter counts, the LM head tied to the token embedding") {
  CHECK(gpt2_parameter_count(50257, 1024, 12, 768) == 124'439'808);
  CHECK(model_size("gpt2-124M").parameters == 124'439'808);
  CHECK(model_size("gpt2-355M").parameters == 354'823'168);
  CHECK(model_size("gpt2-774M").parameters == 774'030'080);
  CHECK(model_size("gpt2-1558M").parameters == 1'557'611'200);
  CHECK(model_size(ACCEL_TEST_FIXTURES_DIR "/f32.safetensors").parameters > 0);
  CHECK_THROWS_WITH_AS(model_size("gpt3"), doctest::Contains("--model 'gpt3' is neither a known model"), Error);
}

TEST_CASE("accel config update writes every current key, keeps the file's values, and names the keys it added") {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("accel-config-update-{}", getpid());
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "config.yaml").string();
  std::ofstream(path) << "num_processes: 3\nbackend: ring\nmixed_precision: bf16\n";
  const std::string said = update_config_file(path);
  CHECK(said.rfind(fmt::format("accel config: updated {} (added with defaults: environment, num_machines, ", path), 0) == 0);
  CHECK(said.find("debug, timeout, fp8_format, fp8_margin, fp8_amax_history_len, fp8_amax_compute_algo, "
                  "fp8_include_first_last; the other values kept)") != std::string::npos);
  ConfigFile expected;
  expected.num_processes = 3;
  expected.backend = Backend::ring;
  expected.mixed_precision = MixedPrecision::bf16;
  CHECK(load_config(path) == expected);
  CHECK(update_config_file(path) ==
        fmt::format("accel config: updated {} (no key missing; values kept, comments rewritten)", path));
  CHECK(load_config(path) == expected);

  // A file that does not parse is left as it was; an Accelerate file is not rewritten.
  std::ofstream(path) << "num_processes: 3\nbakend: ring\n";
  CHECK_THROWS_WITH_AS(update_config_file(path), doctest::Contains(":2: unknown key 'bakend'"), Error);
  std::ifstream in(path);
  std::stringstream kept;
  kept << in.rdbuf();
  CHECK(kept.str() == "num_processes: 3\nbakend: ring\n");
  std::ofstream(path) << "distributed_type: MULTI_GPU\nnum_processes: 2\ngpu_ids: all\n";
  CHECK_THROWS_WITH_AS(update_config_file(path),
                       doctest::Contains("is an Accelerate config file; accel reads it as it is (its ignored keys: "
                                         "gpu_ids)"),
                       Error);
  CHECK_THROWS_WITH_AS(update_config_file((dir / "none.yaml").string()),
                       doctest::Contains("there is no config file at"), Error);
  std::filesystem::remove_all(dir);
}

TEST_CASE("pick_free_port returns a port nothing listens on, for IPv4 and IPv6 loopback") {
  const int port = pick_free_port("");
  CHECK(port > 0);
  CHECK(port <= 65535);
  CHECK(pick_free_port("127.0.0.1") > 0);
  CHECK_THROWS_WITH_AS(pick_free_port("not-an-address"), doctest::Contains("is not a numeric address"), Error);
}
