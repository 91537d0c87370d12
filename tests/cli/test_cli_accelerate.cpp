// The accel executable takes Accelerate's words, as a user coming from `accelerate launch` types
// them: OMP_NUM_THREADS per rank, --multi_gpu, --mpirun_hostfile, --main_process_port 0, -m, -q,
// --debug, a mistyped command, config default/update, env/test --config_file, an Accelerate config
// file, ACCELERATE_* variables, and estimate-memory. Every command runs under `timeout`.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "accel_config.h"
#include "cli_run.h"
#include "runtime/config_file.h"

using namespace cli_test;

namespace {

const std::string kFixtures = ACCEL_TEST_FIXTURES_DIR;

// The words of line, split at blanks.
std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

}  // namespace

TEST_CASE("accel launch exports OMP_NUM_THREADS: the user's value is kept, --num_cpu_threads_per_process wins, "
          "else CPUs / local ranks") {
  Run r = run(fmt::format("OMP_NUM_THREADS=7 {} launch --dry-run -n 2 prog", kAccel));
  INFO(r.output);
  CHECK(contains(r.output, " -x ACCEL_BACKEND=auto -x OMP_NUM_THREADS=7 "));
  r = run(fmt::format("OMP_NUM_THREADS=7 {} launch --dry-run -n 2 --num_cpu_threads_per_process 3 prog", kAccel));
  CHECK(contains(r.output, " -x OMP_NUM_THREADS=3 "));
  CHECK_FALSE(contains(r.output, "OMP_NUM_THREADS=7"));
  r = run(fmt::format("env -u OMP_NUM_THREADS {} launch --dry-run -n 100000 prog", kAccel));
  CHECK(contains(r.output, " -x OMP_NUM_THREADS=1 "));  // never below one
  r = run(fmt::format("env -u OMP_NUM_THREADS taskset -c 0 {} launch --dry-run -n 1 prog", kAccel));
  CHECK(contains(r.output, " -x OMP_NUM_THREADS=1 "));  // the affinity mask, not the machine's cores
  r = run(fmt::format("{} launch --dry-run -n 2 --num_cpu_threads_per_process 0 prog", kAccel));
  CHECK(r.status != 0);
}

TEST_CASE("Accelerate's launch words: --mpirun_hostfile, --debug, -m, --multi_gpu and -q") {
  const TempDir dir("words");
  const std::string hosts = dir.write("hosts", "localhost slots=2\n");
  Run r = run(fmt::format("{} launch --dry-run -n 2 --mpirun_hostfile {} prog", kAccel, hosts));
  INFO(r.output);
  CHECK(contains(r.output, fmt::format(" --hostfile {} ", hosts)));
  r = run(fmt::format("{} launch --dry-run -n 1 --debug prog", kAccel));
  CHECK(contains(r.output, " -x ACCEL_BACKEND=auto -x ACCEL_DEBUG=1 "));
  r = run(fmt::format("{} launch --dry-run -n 1 prog", kAccel));
  CHECK_FALSE(contains(r.output, "ACCEL_DEBUG"));
  r = run(fmt::format("{} launch -m my_module", kAccel));
  CHECK(r.status == 1);
  CHECK(lines_starting(r.output, "accel launch: -m/--module runs a Python module (python -m); that is not "
                                 "applicable to C++ programs").size() == 1);
  r = run(fmt::format("{} launch --dry-run --multi_gpu -n 2 prog", kAccel));
  CHECK(r.status == 0);
  CHECK(lines_starting(r.output, "accel launch: --multi_gpu has nothing to switch on").size() == 1);
  r = run(fmt::format("{} launch --dry-run --multi_gpu -q -n 2 prog", kAccel));
  CHECK(r.status == 0);
  CHECK(lines_starting(r.output, "accel launch: ").empty());  // no notes, only the mpirun line
  CHECK(lines_starting(r.output, "mpirun -np 2 ").size() == 1);
}

TEST_CASE("--main_process_port 0 picks a free port, and that port is what the ranks get") {
  Run r = run(fmt::format("{} launch --dry-run -n 1 --main_process_port 0 prog", kAccel));
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::vector<std::string> note = lines_starting(r.output, "accel launch: --main_process_port 0: using port ");
  REQUIRE(note.size() == 1);
  const std::string port = note[0].substr(note[0].rfind(' ') + 1);
  CHECK(std::stoi(port) > 0);
  CHECK(contains(r.output, fmt::format(" -x ACCEL_MAIN_PROCESS_PORT={} ", port)));
  r = run(fmt::format("{} launch --dry-run -n 1 --main_process_port 1234 prog", kAccel));
  CHECK(contains(r.output, " -x ACCEL_MAIN_PROCESS_PORT=1234 "));
  r = run(fmt::format("{} launch --dry-run -n 1 prog", kAccel));
  CHECK_FALSE(contains(r.output, "ACCEL_MAIN_PROCESS_PORT"));  // not given: the line stays as it was
  r = run(fmt::format("{} launch --dry-run -n 4 --num_machines 2 --machine_rank 1 --main_process_ip 127.0.0.1 "
                      "--main_process_port 0 prog",
                      kAccel));
  CHECK(r.status == 1);
  CHECK(contains(r.output, "--main_process_port 0 picks a free port on machine 0; machine 1 must be given the port"));
#ifdef ACCEL_MPIRUN
  // A real launch: the rank reads the port the note names.
  r = run(fmt::format("{} launch -n 1 --main_process_port 0 -- sh -c 'echo rank sees port $ACCEL_MAIN_PROCESS_PORT'",
                      kAccel),
          60);
  INFO(r.output);
  CHECK(r.status == 0);
  const std::vector<std::string> picked = lines_starting(r.output, "accel launch: --main_process_port 0: using port ");
  REQUIRE(picked.size() == 1);
  CHECK(lines_starting(r.output, "rank sees port " + picked[0].substr(picked[0].rfind(' ') + 1)).size() == 1);
#endif
}

TEST_CASE("a mistyped command is named with the nearest one") {
  Run r = run(fmt::format("{} lanch -n 2 prog", kAccel));
  CHECK(r.status == 1);
  CHECK(r.output ==
        "accel: unknown command 'lanch'; did you mean launch? (commands: config, launch, env, test, bench, "
        "estimate-memory, merge-weights, trace)\n");
  r = run(fmt::format("{} config defualt", kAccel));
  CHECK(r.status == 1);
  CHECK(r.output == "accel config: unknown command 'defualt'; did you mean default? (commands: default, update)\n");
}

TEST_CASE("accel config default takes --config_file on either side, refuses an existing file without --force; "
          "config update") {
  const TempDir dir("config_words");
  const std::string path = (dir.path / "c.yaml").string();
  Run r = run(fmt::format("{} config default --config_file {}", kAccel, path));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output == fmt::format("accel config: wrote {}\n", path));
  r = run(fmt::format("{} config default --config_file {}", kAccel, path));
  CHECK(r.status == 1);
  CHECK(r.output == fmt::format("accel config default: {} exists; give --force to overwrite it, or `accel config "
                                "update` to bring it to the current keys keeping its values\n",
                                path));
  r = run(fmt::format("{} config --config_file {} default --force", kAccel, path));
  CHECK(r.status == 0);
  const std::string old = dir.write("old.yaml", "num_processes: 3\n");
  r = run(fmt::format("{} config update --config_file {}", kAccel, old));
  CHECK(r.status == 0);
  CHECK(lines_starting(r.output, fmt::format("accel config: updated {} (added with defaults: environment,", old)).size() == 1);
  CHECK(accel::load_config(old).num_processes == 3);
  CHECK(lines_starting(r.output, "accel config: updated").size() == 1);
}

TEST_CASE("accel env and accel test take --config_file") {
  const TempDir dir("env_test_config");
  const std::string good = dir.write("good.yaml", "num_processes: 3\n");
  Run r = run(fmt::format("{} env --config_file {}", kAccel, good));
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(contains(r.output, fmt::format("config file: {}\n  num_processes: 3\n  (valid)\n", good)));
  r = run(fmt::format("{} env --config_file {}", kAccel, kFixtures + "/accelerate/multi_gpu.yaml"));
  CHECK(contains(r.output, "  (valid: an Accelerate config; ignored: downcast_bf16, enable_cpu_affinity, gpu_ids, "));
  // The self-test's Accelerator reads the file given: a bad value fails it, naming the file and line.
  const std::string bad = dir.write("bad.yaml", "mixed_precision: fp4\n");
  r = run(fmt::format("{} test --config_file {}", kAccel, bad), 120);
  CHECK(r.status == 1);
  CHECK(contains(r.output, fmt::format("{}:1: mixed_precision must be one of no, fp16, bf16, fp8, got 'fp4'", bad)));
  r = run(fmt::format("{} test --config_file /nonexistent/x.yaml", kAccel));
  CHECK(r.status == 1);
  CHECK(r.output == "accel test: --config_file /nonexistent/x.yaml: no such file\n");
}

TEST_CASE("an Accelerate config file is read for its keys with a meaning here, the others listed on one line") {
  const std::string fixture = kFixtures + "/accelerate/deepspeed.yaml";
  const Run r = run(fmt::format("{} launch --config_file {} --dry-run --num_processes 2 prog", kAccel, fixture));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(lines_starting(r.output, fmt::format("accel launch: {} is an Accelerate config; ignored (no meaning in "
                                             "accel): deepspeed_config.gradient_clipping, ",
                                             fixture))
            .size() == 1);
  CHECK(contains(r.output, "mpirun -np 2 "));  // the flag over the file's 4
  CHECK(contains(r.output, " -x ACCEL_MIXED_PRECISION=fp16 -x ACCEL_GRADIENT_ACCUMULATION_STEPS=4 "));
  CHECK(contains(r.output, " -x ACCEL_ZERO_STAGE=2 "));
}

TEST_CASE("accel estimate-memory prints the per-rank bytes by strategy, precision and process count") {
  Run r = run(fmt::format("{} estimate-memory --model gpt2-124M --bytes", kAccel));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(lines_starting(r.output, "accel estimate-memory: gpt2-124M: 124,439,808 parameters, GPT-2 small").size() == 1);
  // strategy, processes, parameters, weight copies, gradients, f32 masters, optimizer, total: by hand
  // from Ψ = 124439808.
  std::vector<std::vector<std::string>> rows;
  for (const std::string& line : lines_of(r.output))
    if (line.rfind("ddp ", 0) == 0 || line.rfind("zero", 0) == 0) rows.push_back(words_of(line));
  REQUIRE(rows.size() == 3 * 4 * 4);  // 3 precisions x 4 strategies x 4 process counts
  using W = std::vector<std::string>;
  CHECK(rows[0] == W{"ddp", "1", "497759232", "0", "497759232", "0", "995518464", "1991036928"});          // no: 16 Ψ
  CHECK(rows[4 + 2] == W{"zero1", "4", "497759232", "0", "497759232", "0", "248879616", "1244398080"});  // 8Ψ + 8Ψ/4
  CHECK(rows[8 + 3] == W{"zero2", "8", "497759232", "0", "62219904", "0", "124439808", "684418944"});       // 4Ψ + 12Ψ/8
  CHECK(rows[12 + 3] == W{"zero3", "8", "62219904", "0", "62219904", "0", "124439808", "248879616"});       // 16Ψ/8
  // bf16: DDP keeps f32 masters, f32 grads and 16-bit copies (18Ψ); ZeRO 2 + 2 + 12 bytes, sharded.
  CHECK(rows[16] == W{"ddp", "1", "497759232", "248879616", "497759232", "0", "995518464", "2239916544"});
  CHECK(rows[16 + 4 + 2] ==
        W{"zero1", "4", "248879616", "0", "248879616", "124439808", "248879616", "871078656"});  // 4Ψ + 12Ψ/4
  CHECK(rows[16 + 12 + 3] == W{"zero3", "8", "31109952", "0", "31109952", "62219904", "124439808", "248879616"});  // 16Ψ/8
  CHECK(lines_starting(r.output, "What accel holds: in f32, f32 parameters").size() == 1);

  r = run(fmt::format("{} estimate-memory --model {} --strategy zero3 --mixed_precision no -n 2 --bytes", kAccel,
                      kFixtures + "/multi.safetensors"));
  CHECK(r.status == 0);
  CHECK(contains(r.output, "tensors in the safetensors file"));
  // fp8 is accepted, with bf16's 16-bit copies as its bound; a word that is no precision is refused.
  r = run(fmt::format("{} estimate-memory --model gpt2-124M --strategy zero3 --mixed_precision fp8 -n 8 --bytes", kAccel));
  CHECK(r.status == 0);
  CHECK(contains(r.output, "mixed_precision fp8 (per rank)"));
  CHECK(contains(r.output, "248879616"));
  // Refused with status 1 and a message saying why.
  auto check_refused = [](const std::string& args, const std::string& message) {
    const Run refused = run(fmt::format("{} estimate-memory {}", kAccel, args));
    INFO(args, ": ", refused.output);
    CHECK(refused.status == 1);
    CHECK(contains(refused.output, message));
  };
  check_refused("--model gpt2-124M --mixed_precision fp4", "--mixed_precision 'fp4' is not one of no, bf16, fp16, fp8");
  check_refused("--model gpt3", "--model 'gpt3' is neither a known model");
  check_refused("--model gpt2-124M --strategy zero4", "--strategy 'zero4' is not one of ddp, zero1, zero2, zero3");

  // HYBRID_SHARD in shard groups of 2: FULL_SHARD's bytes at 2 processes, whatever the world size.
  r = run(fmt::format("{} estimate-memory --model gpt2-124M --strategy zero3,HYBRID_SHARD --hybrid_shard_size 2 "
                      "--mixed_precision bf16 -n 1,2,8 --bytes",
                      kAccel));
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::vector<std::vector<std::string>> hybrid;
  for (const std::string& line : lines_of(r.output))
    if (line.rfind("HYBRID_SHARD/2 ", 0) == 0 || line.rfind("zero3 ", 0) == 0) hybrid.push_back(words_of(line));
  REQUIRE(hybrid.size() == 6);
  using W = std::vector<std::string>;
  const W zero3_at_2 = W{"zero3", "2", "124439808", "0", "124439808", "248879616", "497759232", "995518464"};
  CHECK(hybrid[1] == zero3_at_2);  // 16Ψ/2 under bf16
  CHECK(hybrid[3] == W{"HYBRID_SHARD/2", "1", "(not", "a", "multiple", "of", "the", "shard", "size", "2)"});
  W hybrid_at_8 = zero3_at_2;
  hybrid_at_8[0] = "HYBRID_SHARD/2";
  hybrid_at_8[1] = "8";
  CHECK(hybrid[5] == hybrid_at_8);
  check_refused("--model gpt2-124M --strategy HYBRID_SHARD", "--strategy HYBRID_SHARD needs --hybrid_shard_size");
  check_refused("--model gpt2-124M --strategy zero3 --hybrid_shard_size 2",
                "--hybrid_shard_size 2 is given but --strategy (zero3) lists no HYBRID_SHARD");
}

#if defined(ACCEL_MPIRUN) && defined(ACCEL_EXAMPLES_DIR)
TEST_CASE("accel launch --multi_gpu --num_processes 2 mlp_classifier runs; its settings line shows the thread count") {
  const std::string program = std::string(ACCEL_EXAMPLES_DIR) + "/mlp_classifier --epochs 2";
  Run r = run(fmt::format("{} launch --multi_gpu --num_processes 2 --num_cpu_threads_per_process 1 {}", kAccel, program),
              180);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(lines_starting(r.output, "accel launch: --multi_gpu has nothing to switch on").size() == 1);
  // One settings line (the main process's), with the thread count the launch set.
  const std::vector<std::string> settings = lines_starting(r.output, "accel: 2 process(es), device ");
  REQUIRE(settings.size() == 1);
  CHECK(contains(settings[0], ", cpu_threads=1 (environment OMP_NUM_THREADS), "));
  CHECK(lines_starting(r.output, "final: accuracy=").size() == 1);

  // The Accelerate fixture, as `accelerate config` wrote it for 8 GPUs in bf16, with the process count overridden.
  const std::string fixture = kFixtures + "/accelerate/multi_gpu.yaml";
  r = run(fmt::format("{} launch --config_file {} --num_processes 2 {}", kAccel, fixture, program), 180);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(lines_starting(r.output, fmt::format("accel launch: {} is an Accelerate config; ignored (no meaning in accel): "
                                             "downcast_bf16, enable_cpu_affinity, gpu_ids, main_training_function, "
                                             "rdzv_backend, same_network, tpu_env, tpu_use_cluster, tpu_use_sudo",
                                             fixture))
            .size() == 1);
  REQUIRE(lines_starting(r.output, "accel: 2 process(es), device ").size() == 1);
  CHECK(contains(lines_starting(r.output, "accel: 2 process(es), device ")[0],
                 "mixed_precision=bf16 (environment ACCEL_MIXED_PRECISION)"));
}
#endif

#ifdef ACCEL_EXAMPLES_DIR
TEST_CASE("ACCELERATE_* variables reach a plainly started program's settings, with one note") {
  const Run r = run(fmt::format("ACCELERATE_MIXED_PRECISION=bf16 {}/mlp_classifier --epochs 1", ACCEL_EXAMPLES_DIR), 120);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(lines_starting(r.output, "accel: reading ACCELERATE_MIXED_PRECISION=bf16 as ACCEL_MIXED_PRECISION").size() == 1);
  const std::vector<std::string> settings = lines_starting(r.output, "accel: 1 process(es), device ");
  REQUIRE(settings.size() == 1);
  CHECK(contains(settings[0], "mixed_precision=bf16 (environment ACCELERATE_MIXED_PRECISION)"));
}
#endif
