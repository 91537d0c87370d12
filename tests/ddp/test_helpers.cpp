// Accelerate's process helpers on every rank count the suite runs: which rank is which, running code
// on some ranks only, splitting a list between the ranks, an early-stop trigger any rank can set,
// JSON objects gathered and broadcast, and the local main process going first.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support.h"

namespace test {

TEST_CASE("is_last_process, distributed_type, mixed_precision and use_distributed describe the job") {
  Accelerator accelerator(options());
  const int n = accelerator.num_processes(), rank = accelerator.process_index();
  CHECK(accelerator.is_last_process() == (rank == n - 1));
  CHECK(accelerator.distributed_type() == (n == 1 ? "NO" : "MULTI_CPU"));
  CHECK(accelerator.use_distributed() == (n > 1));
  CHECK(accelerator.mixed_precision() == MixedPrecision::no);
}

TEST_CASE("on_main_process, on_local_main_process, on_last_process and on_process(i) run on those ranks only") {
  Accelerator accelerator(options());
  const int n = accelerator.num_processes(), rank = accelerator.process_index();
  std::vector<std::string> ran;
  accelerator.on_main_process([&] { ran.push_back("main"); });
  accelerator.on_local_main_process([&] { ran.push_back("local main"); });
  accelerator.on_last_process([&] { ran.push_back("last"); });
  accelerator.on_process(1, [&] { ran.push_back("1"); });
  std::vector<std::string> expected;
  if (rank == 0) expected = {"main", "local main"};
  if (rank == n - 1) expected.push_back("last");
  if (rank == 1) expected.push_back("1");
  CHECK(ran == expected);
}

TEST_CASE("split_between_processes gives each rank its contiguous part, padded on request") {
  Accelerator accelerator(options());
  const int n = accelerator.num_processes(), rank = accelerator.process_index();
  std::vector<int> items(10);
  for (int i = 0; i < 10; ++i) items[i] = i;
  std::vector<int> all;
  for (const nlohmann::json& part : accelerator.gather_object(accelerator.split_between_processes(items)))
    for (int v : part.get<std::vector<int>>()) all.push_back(v);
  CHECK(all == items);  // every item once, in order
  const std::vector<int> padded = accelerator.split_between_processes(items, true);
  CHECK(padded.size() == static_cast<size_t>((10 + n - 1) / n));
  if (n == 4) {
    const std::vector<std::vector<int>> parts = {{0, 1, 2}, {3, 4, 5}, {6, 7, 7}, {8, 9, 9}};
    CHECK(padded == parts[static_cast<size_t>(rank)]);
  }
}

TEST_CASE("set_trigger on one rank makes check_trigger true on every rank, once") {
  Accelerator accelerator(options());
  CHECK_FALSE(accelerator.check_trigger());
  if (accelerator.is_last_process()) accelerator.set_trigger();
  CHECK(accelerator.check_trigger());
  CHECK_FALSE(accelerator.check_trigger());  // cleared
}

TEST_CASE("gather_object and broadcast_object_list carry strings and JSON values") {
  Accelerator accelerator(options());
  const int n = accelerator.num_processes(), rank = accelerator.process_index();
  const std::vector<nlohmann::json> gathered =
      accelerator.gather_object({{"rank", rank}, {"name", std::string(static_cast<size_t>(rank) + 1, 'x')}});
  REQUIRE(gathered.size() == static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    CHECK(gathered[static_cast<size_t>(r)]["rank"] == r);
    CHECK(gathered[static_cast<size_t>(r)]["name"] == std::string(static_cast<size_t>(r) + 1, 'x'));
  }
  std::vector<nlohmann::json> objects = {nullptr, nullptr};
  if (rank == n - 1) objects = {"from the last rank", {{"lr", 0.5}, {"steps", {1, 2, 3}}}};
  const std::vector<nlohmann::json> received = accelerator.broadcast_object_list(objects, n - 1);
  CHECK(received[0] == "from the last rank");
  CHECK(received[1]["lr"] == 0.5);
  CHECK(received[1]["steps"] == nlohmann::json({1, 2, 3}));
  CHECK(error_of([&] { accelerator.broadcast_object_list(objects, n); }) ==
        fmt::format("Accelerator::broadcast_object_list: from = {} is not a rank of {}", n, n));
}

TEST_CASE("local_main_process_first: the local main process leaves its scope before the others enter") {
  Accelerator accelerator(options());
  const int rank = accelerator.process_index();
  const std::string marker = shared_temp_dir() + "/written";
  {
    auto first = accelerator.local_main_process_first();
    if (accelerator.is_local_main_process()) {
      std::ofstream(marker) << "ready";
    } else {
      CHECK(std::filesystem::exists(marker));  // written before this rank came in
    }
  }
  accelerator.wait_for_everyone();
  if (rank == 0) std::filesystem::remove_all(std::filesystem::path(marker).parent_path());
}

}  // namespace test
