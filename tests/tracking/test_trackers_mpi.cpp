// The trackers and the progress bar on 2 ranks under mpirun: the built-in trackers write on the main
// process only (the other rank writes nothing, and what it logs never reaches the files), a user
// tracker with main_process_only false runs on every rank, and the progress bar is silent off rank 0.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "../mpi_doctest_main.h"
#include "accel.h"
#include "../temp_dir.h"
#include "../text_file.h"

using namespace accel;
using nlohmann::json;

namespace {

struct CountingTracker : Tracker {
  CountingTracker(std::string name, bool main_only) : name_(std::move(name)), main_only_(main_only) {}
  std::string name() const override { return name_; }
  void store_init_configuration(const json&) override { ++inits; }
  void log(const json& values, int64_t) override { logged.push_back(values); }
  void finish() override { ++finishes; }
  bool main_process_only() const override { return main_only_; }
  std::string name_;
  bool main_only_;
  int inits = 0, finishes = 0;
  std::vector<json> logged;
};

}  // namespace

TEST_CASE("built-in trackers write on the main process only; an every-rank tracker runs on each rank") {
  auto everywhere = std::make_shared<CountingTracker>("everywhere", false);
  auto main_only = std::make_shared<CountingTracker>("main_only", true);
  AcceleratorOptions o;
  o.print_settings = false;
  o.log_with = {"all", everywhere, main_only};
  // Every rank names the same directory: rank 0's.
  const std::string root =
      (std::filesystem::temp_directory_path() / fmt::format("accel-tracking-mpi-{}", getpid())).string();
  o.project_configuration.project_dir = root;
  std::filesystem::path run_dir;
  {
    Accelerator accelerator(o);
    REQUIRE(accelerator.num_processes() == 2);
    const std::string dir = accelerator.broadcast_object_list({json(root)})[0].get<std::string>();
    // A fresh Accelerator with the shared directory (the options are read at construction).
    o.project_configuration.project_dir = dir;
    run_dir = std::filesystem::path(dir) / "mpi";
  }
  const bool main = [&] {
    Accelerator accelerator(o);
    const int rank = accelerator.process_index();
    accelerator.init_trackers("mpi", {{"world_size", 2}});
    accelerator.log({{"rank", rank}, {"loss", 1.0 + rank}}, 1);
    accelerator.log({{"rank", rank}, {"loss", 0.5 + rank}}, 2);
    CHECK((accelerator.get_tracker("jsonl") != nullptr) == (rank == 0));
    CHECK((accelerator.get_tracker("main_only") != nullptr) == (rank == 0));
    CHECK(accelerator.get_tracker("everywhere") != nullptr);

    std::ostringstream bar_output;
    {
      ProgressBarOptions bo;
      bo.out = &bar_output;
      bo.terminal = false;
      bo.print_every_steps = 1;
      auto bar = accelerator.progress_bar(3, bo);
      for (int i = 0; i < 3; ++i) bar.update();
    }
    CHECK(bar_output.str().empty() == (rank != 0));
    accelerator.end_training();
    accelerator.wait_for_everyone();
    return accelerator.is_main_process();
  }();

  CHECK(everywhere->inits == 1);
  CHECK(everywhere->logged.size() == 2);
  CHECK(everywhere->finishes == 1);
  CHECK(main_only->inits == (main ? 1 : 0));
  CHECK(main_only->logged.size() == (main ? 2u : 0u));
  // Every rank reads the main process's files: rank 0's values alone, one events file.
  const std::vector<std::string> records = test::lines_of(test::read_text(run_dir / "metrics.jsonl"));
  REQUIRE(records.size() == 3);
  CHECK(json::parse(records[1])["values"] == json{{"rank", 0}, {"loss", 1.0}});
  CHECK(json::parse(records[2])["values"] == json{{"rank", 0}, {"loss", 0.5}});
  CHECK(test::read_text(run_dir / "metrics.csv") == "step,loss,rank\n1,1.0,0\n2,0.5,0\n");
  int event_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir))
    event_files += entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  CHECK(event_files == 1);
  {
    Accelerator accelerator(o);
    accelerator.wait_for_everyone();  // every rank has read the files
    if (main) std::filesystem::remove_all(run_dir.parent_path());
  }
}

int main(int argc, char** argv) { return test::run_mpi_doctest(argc, argv, "tracking tests"); }
