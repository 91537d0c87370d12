// Accelerate's process helpers on every rank count the suite runs: which rank is which, running code
// on some ranks only, splitting a list between the ranks, an early-stop trigger any rank can set,
// JSON objects gathered and broadcast, the local main process going first, nested structures of
// tensors through the collectives, print on each machine, and free_memory between two trainings.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
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

TEST_CASE("gather, reduce and broadcast take vectors and string maps of tensors, to any depth") {
  Accelerator accelerator(options());
  const int n = accelerator.num_processes(), rank = accelerator.process_index();
  const double r = rank, sum = n * (n - 1) / 2.0;
  const std::map<std::string, std::vector<Tensor>> tree{
      {"loss", {full({1}, r)}}, {"parts", {full({2}, r + 1), full({1, 3}, 2 * r)}}};

  const auto reduced = accelerator.reduce(tree);
  CHECK(reduced.at("loss")[0].to_vector<float>() == std::vector<float>{float(sum)});
  CHECK(reduced.at("parts")[0].to_vector<float>() == std::vector<float>(2, float(sum + n)));
  CHECK(reduced.at("parts")[1].shape() == Shape{1, 3});
  CHECK(reduced.at("parts")[1].to_vector<float>() == std::vector<float>(3, float(2 * sum)));
  CHECK(accelerator.reduce(tree, ReduceOp::max).at("loss")[0].item() == n - 1);
  CHECK(accelerator.reduce(tree, "mean").at("loss")[0].item() == doctest::Approx(sum / n));

  const auto gathered = accelerator.gather(tree);
  REQUIRE(gathered.at("parts")[1].shape() == Shape{n, 3});
  const std::vector<float> rows = gathered.at("parts")[1].to_vector<float>();
  for (int i = 0; i < n; ++i) CHECK(rows[static_cast<size_t>(3 * i)] == 2.0f * i);  // rank order

  const std::vector<std::vector<Tensor>> nested{{full({2}, r)}, {}};
  const auto received = accelerator.broadcast(nested, n - 1);
  REQUIRE(received.size() == 2);
  CHECK(received[0][0].to_vector<float>() == std::vector<float>(2, float(n - 1)));
  CHECK(received[1].empty());
}

TEST_CASE("ranks that pass different structures of tensors all throw one message naming them") {
  Accelerator accelerator(options());
  const int n = accelerator.num_processes(), rank = accelerator.process_index();
  if (n == 1) return;  // one process has nobody to disagree with
  std::map<std::string, Tensor> tree{{"a", full({1}, 1.0)}};
  if (rank == 0) tree.emplace("b", full({1}, 1.0));
  std::string expected = "Accelerator::reduce: the ranks passed structures of tensors that differ (rank 0 {a: T, b: T}";
  for (int r = 1; r < n; ++r) expected += fmt::format(", rank {} {{a: T}}", r);
  CHECK(error_of([&] { accelerator.reduce(tree); }) ==
        expected + "); every rank must pass the same keys and lengths");
}

// What print writes on this rank.
std::string printed_by(const Accelerator& accelerator) {
  std::ostringstream captured;
  std::streambuf* old = std::cout.rdbuf(captured.rdbuf());
  accelerator.print("step", 3, "loss", 0.5);
  std::cout.rdbuf(old);
  return captured.str();
}

TEST_CASE("print writes on the main process, or with print_on_every_machine on each machine's local main") {
  {
    Accelerator accelerator(options());
    CHECK(printed_by(accelerator) == (accelerator.is_main_process() ? "step 3 loss 0.5\n" : ""));
  }
  // Each rank as if alone on its machine: the launcher's local rank and local size say so.
  const char* local_rank = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const char* local_size = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const std::string saved_rank = local_rank ? local_rank : "", saved_size = local_size ? local_size : "";
  if (local_rank != nullptr) {
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1", 1);
  }
  AcceleratorOptions every_machine = options();
  every_machine.print_on_every_machine = true;
  {
    Accelerator accelerator(every_machine);
    CHECK(accelerator.is_local_main_process());
    CHECK(printed_by(accelerator) == "step 3 loss 0.5\n");
  }
  if (local_rank != nullptr) {
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", saved_rank.c_str(), 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", saved_size.c_str(), 1);
  }
}

// Each rank's gradient of a Linear's weight for an input that differs by rank, gathered.
std::vector<double> weight_grads_of_every_rank(Accelerator& accelerator, nn::Linear& layer) {
  const Tensor input = full({1, 3}, accelerator.process_index() + 1.0);
  accelerator.backward(sum(layer.forward(input)));
  std::vector<double> all;
  for (const nlohmann::json& part : accelerator.gather_object(layer.weight().grad().to_vector<float>()))
    for (double v : part.get<std::vector<double>>()) all.push_back(v);
  return all;
}

TEST_CASE("free_memory leaves earlier models unprepared, and a model prepared after it trains as usual") {
  Accelerator accelerator(options());
  const int n = accelerator.num_processes();
  Generator generator(7);
  auto first = std::make_shared<nn::Linear>(3, 2, true, generator);
  accelerator.prepare(first);
  if (n > 1) CHECK(accelerator.reducer(*first) != nullptr);
  accelerator.free_memory();
  CHECK(accelerator.reducer(*first) == nullptr);
  // Its gradients are no longer averaged: each rank keeps its own.
  const std::vector<double> local = weight_grads_of_every_rank(accelerator, *first);
  for (int r = 0; r < n; ++r) CHECK(local[static_cast<size_t>(r) * local.size() / static_cast<size_t>(n)] == r + 1.0);

  auto second = std::make_shared<nn::Linear>(3, 2, true, generator);
  accelerator.prepare(second);
  const std::vector<double> averaged = weight_grads_of_every_rank(accelerator, *second);
  const size_t per_rank = averaged.size() / static_cast<size_t>(n);
  for (size_t i = 0; i < averaged.size(); ++i) CHECK(averaged[i] == averaged[i % per_rank]);
  CHECK(averaged[0] == doctest::Approx((n + 1) / 2.0));  // the mean over ranks of input (rank + 1)
}

}  // namespace test
