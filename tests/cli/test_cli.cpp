// The accel executable as a user runs it: `accel config default` writes a config that parses back,
// `accel env` prints every section a bug report needs, `accel test` passes under mpirun with 1 and 2
// ranks and fails with a named check when the settings are bad, `accel launch --dry-run` prints the
// exact mpirun line, and a bad config file is refused naming the key and the line. Every command runs
// under `timeout`, so a hang fails the test instead of stalling it.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "accel_config.h"
#include "runtime/cli/config_wizard.h"
#include "runtime/config_file.h"
#include "cli_run.h"

using namespace cli_test;

TEST_CASE("accel config default writes the default config where ACCEL_CONFIG_FILE or --config_file says") {
  const TempDir dir("config");
  const std::string by_env = (dir.path / "sub" / "config.yaml").string();
  Run r = run(fmt::format("ACCEL_CONFIG_FILE={} {} config default", by_env, kAccel));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output == fmt::format("accel config: wrote {}\n", by_env));
  CHECK(accel::load_config(by_env) == accel::default_answers());

  const std::string by_flag = (dir.path / "flag.yaml").string();
  r = run(fmt::format("{} config --config_file {} default", kAccel, by_flag));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(accel::load_config(by_flag) == accel::default_answers());
  // The file explains itself: one comment per key.
  std::ifstream in(by_flag);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(lines_starting(text, "#").size() >= 8);
  CHECK(lines_starting(text, "backend: auto").size() == 1);
}

TEST_CASE("accel env prints every section of a bug report, with the config file in use and its contents") {
  Run r = run(fmt::format("ACCEL_BACKEND=ring {} env", kAccel));
  INFO(r.output);
  REQUIRE(r.status == 0);
  for (const char* section : {"accel version: " ACCEL_VERSION, "build options: ", "build type: ", "compiler: ",
                              "Eigen: ", "CPU GEMM: ", "OpenMP: ", "devices seen: cpu (", "process: rank 0 of 1",
                              "ACCEL_* environment: ", "config file: none (would be /nonexistent/accel-cli-tests.yaml"})
    CHECK_MESSAGE(lines_starting(r.output, section).size() == 1, section);
  // The GEMM line names the library this build uses, as its build options say.
  const bool blas = lines_starting(r.output, "build options: ")[0].find("blas=yes") != std::string::npos;
  CHECK(lines_starting(r.output, blas ? "CPU GEMM: OpenBLAS" : "CPU GEMM: Eigen").size() == 1);
  const std::vector<std::string> settings = lines_starting(r.output, "ACCEL_* environment: ");
  REQUIRE(settings.size() == 1);
  CHECK(contains(settings[0] + " ", " ACCEL_BACKEND=ring "));
  CHECK(contains(settings[0] + " ", " ACCEL_CONFIG_FILE=/nonexistent/accel-cli-tests.yaml "));
#if ACCEL_WITH_MPI
  CHECK(lines_starting(r.output, "MPI: Open MPI v").size() == 1);
  CHECK(lines_starting(r.output, "mpirun: ").size() == 1);
#else
  CHECK(lines_starting(r.output, "MPI: not built in").size() == 1);
#endif

  const TempDir dir("env");
  const std::string good = dir.write("good.yaml", "num_processes: 3\nbackend: ring\n");
  r = run(fmt::format("ACCEL_CONFIG_FILE={} {} env", good, kAccel));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, fmt::format("config file: {}\n  num_processes: 3\n  backend: ring\n  (valid)\n", good)));
  const std::string bad = dir.write("bad.yaml", "num_processes: 3\nbakend: ring\n");
  r = run(fmt::format("ACCEL_CONFIG_FILE={} {} env", bad, kAccel));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, fmt::format("  (invalid: {}:2: unknown key 'bakend' (known keys: ", bad)));
}

TEST_CASE("accel launch --use_deepspeed --zero_stage N and --use_fsdp set the sharding for every rank") {
  Run r = run(fmt::format("{} launch --dry-run -n 1 --use_deepspeed --zero_stage 3 prog", kAccel));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find(" -x ACCEL_BACKEND=auto -x ACCEL_ZERO_STAGE=3 ") != std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 1 --use_deepspeed prog", kAccel));
  CHECK(r.output.find(" -x ACCEL_ZERO_STAGE=2 ") != std::string::npos);  // DeepSpeedPlugin's default
  r = run(fmt::format("{} launch --dry-run -n 1 --use_fsdp prog", kAccel));
  CHECK(r.output.find(" -x ACCEL_FSDP_SHARDING_STRATEGY=FULL_SHARD ") != std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 1 --use_fsdp --fsdp_sharding_strategy SHARD_GRAD_OP prog", kAccel));
  CHECK(r.output.find(" -x ACCEL_FSDP_SHARDING_STRATEGY=SHARD_GRAD_OP ") != std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 4 --use_fsdp --fsdp_sharding_strategy HYBRID_SHARD "
                      "--fsdp_hybrid_shard_size 2 prog",
                      kAccel));
  CHECK(r.output.find(" -x ACCEL_FSDP_SHARDING_STRATEGY=HYBRID_SHARD -x ACCEL_FSDP_HYBRID_SHARD_SIZE=2 ") !=
        std::string::npos);
  // Stage 3's units, with Accelerate's flags.
  r = run(fmt::format("{} launch --dry-run -n 2 --use_fsdp --fsdp_auto_wrap_policy TRANSFORMER_BASED_WRAP "
                      "--fsdp_transformer_layer_cls_to_wrap GPTBlock,MLP prog",
                      kAccel));
  CHECK(r.output.find(" -x ACCEL_FSDP_SHARDING_STRATEGY=FULL_SHARD -x ACCEL_FSDP_TRANSFORMER_CLS_TO_WRAP=GPTBlock,MLP ") !=
        std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 2 --use_fsdp --fsdp_min_num_params 5000 prog", kAccel));
  CHECK(r.output.find(" -x ACCEL_FSDP_MIN_NUM_PARAMS=5000 ") != std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 2 --use_fsdp --fsdp_sharding_strategy SHARD_GRAD_OP "
                      "--fsdp_transformer_layer_cls_to_wrap GPTBlock prog",
                      kAccel));
  CHECK(r.status != 0);
  CHECK(r.output.find("they need --use_fsdp with FULL_SHARD or HYBRID_SHARD, but the sharding strategy is "
                      "'SHARD_GRAD_OP'") != std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 2 --use_fsdp --fsdp_transformer_layer_cls_to_wrap 'GPT Block' prog", kAccel));
  CHECK(r.status != 0);
  CHECK(r.output.find("--fsdp_transformer_layer_cls_to_wrap 'GPT Block' must be module type names (letters, digits "
                      "and '_', not starting with a digit) separated by commas") != std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 2 --use_fsdp --fsdp_auto_wrap_policy SIZE_BASED_WRAP prog", kAccel));
  CHECK(r.status != 0);
  CHECK(r.output.find("--fsdp_auto_wrap_policy SIZE_BASED_WRAP needs --fsdp_min_num_params") != std::string::npos);
  // Stage 3 keeping its units gathered from forward to backward.
  r = run(fmt::format("{} launch --dry-run -n 2 --use_fsdp --fsdp_reshard_after_forward false prog", kAccel));
  CHECK(r.output.find(" -x ACCEL_FSDP_SHARDING_STRATEGY=FULL_SHARD -x ACCEL_FSDP_RESHARD_AFTER_FORWARD=false ") !=
        std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 2 --use_fsdp --fsdp_reshard_after_forward true prog", kAccel));
  CHECK(r.status == 0);
  CHECK(r.output.find("RESHARD_AFTER_FORWARD") == std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 2 --use_deepspeed --fsdp_reshard_after_forward false prog", kAccel));
  CHECK(r.status != 0);
  CHECK(r.output.find("--fsdp_reshard_after_forward false is for stage 3, whose parameters are sharded; it needs "
                      "--use_fsdp with FULL_SHARD or HYBRID_SHARD (or --use_deepspeed --zero_stage 3), but the "
                      "sharding strategy is '', zero_stage 2") != std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 4 --use_fsdp --fsdp_sharding_strategy HYBRID_SHARD_ZERO2 "
                      "--fsdp_reshard_after_forward true prog",
                      kAccel));
  CHECK(r.status != 0);
  CHECK(r.output.find("--fsdp_reshard_after_forward true contradicts --fsdp_sharding_strategy HYBRID_SHARD_ZERO2") !=
        std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 2 --use_fsdp --fsdp_reshard_after_forward FULL_SHARD prog", kAccel));
  CHECK(r.status != 0);
  CHECK(r.output.find("--fsdp_reshard_after_forward 'FULL_SHARD' must be true or false") != std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 4 --use_fsdp --fsdp_hybrid_shard_size 2 prog", kAccel));
  CHECK(r.status != 0);
  CHECK(r.output.find("--fsdp_hybrid_shard_size 2 needs --use_fsdp --fsdp_sharding_strategy HYBRID_SHARD (or "
                      "HYBRID_SHARD_ZERO2), but the sharding strategy is 'FULL_SHARD'") != std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 4 --use_fsdp --fsdp_sharding_strategy HYBRID_SHARD "
                      "--fsdp_hybrid_shard_size 3 prog",
                      kAccel));
  CHECK(r.status != 0);
  CHECK(r.output.find("fsdp_hybrid_shard_size 3 does not divide the 4 processes") != std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 8 --tp_size 2 --use_fsdp --fsdp_sharding_strategy HYBRID_SHARD "
                      "--fsdp_hybrid_shard_size 8 prog",
                      kAccel));
  CHECK(r.status != 0);
  CHECK(r.output.find("fsdp_hybrid_shard_size 8 does not divide the 8 processes over tp_size 2 (4)") !=
        std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 8 --tp_size 2 --use_fsdp --fsdp_sharding_strategy HYBRID_SHARD "
                      "--fsdp_hybrid_shard_size 2 prog",
                      kAccel));
  CHECK(r.status == 0);
  CHECK(r.output.find("ACCEL_FSDP_HYBRID_SHARD_SIZE=2") != std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 1 --use_deepspeed --use_fsdp prog", kAccel));
  CHECK(r.status != 0);
  CHECK(r.output.find("--use_deepspeed and --use_fsdp are two ways to shard; give one") != std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 1 --zero_stage 2 prog", kAccel));
  CHECK(r.status != 0);
  CHECK(r.output.find("--zero_stage 2 needs --use_deepspeed") != std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 1 --use_deepspeed --zero_stage 4 prog", kAccel));
  CHECK(r.status != 0);
  CHECK(r.output.find("--zero_stage") != std::string::npos);
  // The config file's zero_stage, and the flag over it.
  const TempDir dir("launch_zero");
  const std::string config = dir.write("c.yaml", "zero_stage: 1\n");
  r = run(fmt::format("{} launch --config_file {} --dry-run -n 1 prog", kAccel, config));
  CHECK(r.output.find(" -x ACCEL_ZERO_STAGE=1 ") != std::string::npos);
  r = run(fmt::format("{} launch --config_file {} --dry-run -n 1 --use_fsdp prog", kAccel, config));
  CHECK(r.output.find("ACCEL_ZERO_STAGE") == std::string::npos);
  CHECK(r.output.find(" -x ACCEL_FSDP_SHARDING_STRATEGY=FULL_SHARD ") != std::string::npos);
}

TEST_CASE("accel launch --tp_size N sets tensor parallelism for every rank, and must divide the processes") {
  Run r = run(fmt::format("{} launch --dry-run -n 4 --tp_size 2 prog", kAccel));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find(" -x ACCEL_TP_SIZE=2 ") != std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 4 --parallelism_config_tp_size 4 prog", kAccel));  // Accelerate's name
  CHECK(r.output.find(" -x ACCEL_TP_SIZE=4 ") != std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 4 prog", kAccel));
  CHECK(r.output.find("ACCEL_TP_SIZE") == std::string::npos);  // none asked for: none set
  r = run(fmt::format("{} launch --dry-run -n 4 --tp_size 3 prog", kAccel));
  CHECK(r.status != 0);
  CHECK(r.output.find("accel launch: tp_size 3 does not divide the 4 processes") != std::string::npos);
  const TempDir dir("launch_tp");
  const std::string config = dir.write("c.yaml", "num_processes: 4\ntp_size: 2\n");
  r = run(fmt::format("{} launch --config_file {} --dry-run prog", kAccel, config));
  CHECK(r.output.find(" -x ACCEL_TP_SIZE=2 ") != std::string::npos);
}

TEST_CASE("accel launch --dry-run prints the exact mpirun line") {
  const std::string self = accel_real_path();
  const std::string settings =
      "-x ACCEL_MIXED_PRECISION=no -x ACCEL_GRADIENT_ACCUMULATION_STEPS=1 -x ACCEL_USE_CPU=false -x ACCEL_BACKEND=auto";

  SUBCASE("one rank: no --oversubscribe; the program's own flags pass through") {
    const Run r = run(fmt::format("{} launch --dry-run -n 1 ./train --epochs 3", kAccel));
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(r.output == fmt::format("mpirun -np 1{} {}{} {} exec-rank -- ./train --epochs 3\n", root_flag(), settings,
                                  omp_export(1), self));
  }
  SUBCASE("more ranks than any machine has cores: --oversubscribe; settings from the flags; quoting") {
    const Run r = run(fmt::format(
        "{} launch -n 100000 --mixed_precision bf16 --gradient_accumulation_steps 4 --cpu --dry-run prog "
        "--name \"a b\" \"it's\"",
        kAccel));
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(r.output == fmt::format("mpirun -np 100000 --oversubscribe{} -x ACCEL_MIXED_PRECISION=bf16 -x "
                                  "ACCEL_GRADIENT_ACCUMULATION_STEPS=4 -x ACCEL_USE_CPU=true -x ACCEL_BACKEND=auto{} "
                                  "{} exec-rank -- prog --name 'a b' 'it'\\''s'\n",
                                  root_flag(), omp_export(100000), self));
  }
  SUBCASE("the config file gives the defaults, and the flags win over it; -- ends the options") {
    const TempDir dir("launch");
    const std::string config =
        dir.write("c.yaml", "num_processes: 3\nbackend: ring\ngradient_accumulation_steps: 2\n");
    Run r = run(fmt::format("{} launch --config_file {} --dry-run -- prog -n 5", kAccel, config));
    INFO(r.output);
    REQUIRE(r.status == 0);
    const std::string oversubscribe = sysconf(_SC_NPROCESSORS_ONLN) < 3 ? " --oversubscribe" : "";
    CHECK(r.output == fmt::format("mpirun -np 3{}{} -x ACCEL_MIXED_PRECISION=no -x "
                                  "ACCEL_GRADIENT_ACCUMULATION_STEPS=2 -x ACCEL_USE_CPU=false -x ACCEL_BACKEND=ring{} "
                                  "{} exec-rank -- prog -n 5\n",
                                  oversubscribe, root_flag(), omp_export(3), self));
    r = run(fmt::format("ACCEL_CONFIG_FILE={} {} launch -n 1 --gradient_accumulation_steps 8 --dry-run prog", config,
                        kAccel));
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(r.output == fmt::format("mpirun -np 1{} -x ACCEL_MIXED_PRECISION=no -x ACCEL_GRADIENT_ACCUMULATION_STEPS=8 "
                                  "-x ACCEL_USE_CPU=false -x ACCEL_BACKEND=ring{} {} exec-rank -- prog\n",
                                  root_flag(), omp_export(1), self));
  }
  SUBCASE("no program, or an option launch does not know, is an error") {
    Run r = run(fmt::format("{} launch --dry-run -n 2", kAccel));
    CHECK(r.status == 1);
    CHECK(r.output == "accel launch: no program given; usage: accel launch [options] PROGRAM [ARGS...]\n");
    r = run(fmt::format("{} launch --dry-run --bogus 2 prog", kAccel));
    CHECK(r.status == 1);
    CHECK(r.output == "accel launch: unknown option '--bogus' (see accel launch --help)\n");
  }
}

TEST_CASE("a bad config file is refused with a message naming the key and the line") {
  const TempDir dir("bad");
  const std::string unknown = dir.write("unknown.yaml", "num_processes: 2\nmixed_precison: fp16\n");
  Run r = run(fmt::format("{} launch --config_file {} --dry-run prog", kAccel, unknown));
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(contains(r.output, fmt::format("{}:2: unknown key 'mixed_precison' (known keys: backend, debug, environment, ", unknown)));

  const std::string bad_value = dir.write("value.yaml", "num_processes: 2\n\nmixed_precision: fp4\n");
  r = run(fmt::format("ACCEL_CONFIG_FILE={} {} launch --dry-run prog", bad_value, kAccel));
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output == fmt::format("{}:3: mixed_precision must be one of no, fp16, bf16, fp8, got 'fp4'\n", bad_value));

  // The Accelerator reads the same file: `accel test` fails naming the check and the line.
  r = run(fmt::format("ACCEL_CONFIG_FILE={} {} test", bad_value, kAccel));
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(contains(r.output, fmt::format("accel test: rank 0: Accelerator under the launch settings: threw: {}:3: "
                                       "mixed_precision must be one of no, fp16, bf16, fp8, got 'fp4'\n",
                                       bad_value)));
  CHECK(lines_starting(r.output, "accel test: FAIL (2 of ").size() == 1);
}

TEST_CASE("accel test started plainly: one process, PASS; settings no Accelerator can take: FAIL naming the checks") {
  Run r = run(fmt::format("{} test", kAccel), 120);
  INFO(r.output);
  CHECK(r.status == 0);
  const std::vector<std::string> verdict = lines_starting(r.output, "accel test: ");
  REQUIRE(verdict.size() == 1);
  CHECK(verdict[0].rfind("accel test: PASS (", 0) == 0);
  CHECK(contains(verdict[0], " checks, 1 rank, backend none)"));

  // nccl needs a GPU device, and --cpu rules one out, in every build.
  r = run(fmt::format("ACCEL_BACKEND=nccl ACCEL_USE_CPU=true {} test", kAccel), 120);
  INFO(r.output);
  CHECK(r.status == 1);
  const std::vector<std::string> failed = lines_starting(r.output, "accel test: FAIL");
  REQUIRE(failed.size() == 1);
  CHECK(contains(failed[0], " checks failed: Accelerator under the launch settings, training and accumulation; 1 rank, "
                            "backend unknown)"));
}

#ifdef ACCEL_MPIRUN
TEST_CASE("accel test under mpirun with 1 and 2 ranks: PASS, with one verdict line") {
  for (const int ranks : {1, 2}) {
    for (const char* backend : {"mpi", "ring"}) {
      const Run r = run(fmt::format("ACCEL_BACKEND={} {} -np {} -x ACCEL_BACKEND {} test", backend, ACCEL_MPIRUN,
                                    ranks, kAccel),
                        120);
      INFO(ranks, " ranks, backend ", backend, "\n", r.output);
      CHECK(r.status == 0);
      const std::vector<std::string> verdict = lines_starting(r.output, "accel test: ");
      REQUIRE(verdict.size() == 1);
      CHECK(verdict[0].rfind("accel test: PASS (", 0) == 0);
      CHECK(contains(verdict[0], fmt::format(" checks, {} rank{}, backend {})", ranks, ranks == 1 ? "" : "s",
                                             ranks == 1 ? "none" : backend)));
    }
  }
}
#else
TEST_CASE("accel test under mpirun" * doctest::skip()) {}  // no mpirun was found: reported as skipped
#endif

TEST_CASE("accel launch --log_with passes ACCEL_LOG_WITH to the ranks; the config file's log_with too; bad names fail") {
  Run r = run(fmt::format("{} launch --dry-run -n 1 --log_with jsonl,tensorboard prog", kAccel));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find(" -x ACCEL_BACKEND=auto -x ACCEL_LOG_WITH=jsonl,tensorboard ") != std::string::npos);
  r = run(fmt::format("{} launch --dry-run -n 1 prog", kAccel));
  CHECK(r.output.find("ACCEL_LOG_WITH") == std::string::npos);  // not asked for: not set
  const TempDir dir("log_with");
  const std::string config = dir.write("c.yaml", "log_with: [csv]\n");
  r = run(fmt::format("{} launch --config_file {} --dry-run -n 1 prog", kAccel, config));
  CHECK(r.output.find(" -x ACCEL_LOG_WITH=csv ") != std::string::npos);
  r = run(fmt::format("{} launch --config_file {} --log_with all --dry-run -n 1 prog", kAccel, config));
  CHECK(r.output.find(" -x ACCEL_LOG_WITH=all ") != std::string::npos);  // the flag wins over the file
  r = run(fmt::format("{} launch --dry-run -n 1 --log_with wandb prog", kAccel));
  CHECK(r.status == 1);
  CHECK(r.output == "accel launch: --log_with 'wandb' is not valid; expected a comma-separated list of jsonl, csv, "
                    "tensorboard or all\n");
}
