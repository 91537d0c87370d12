// The Accelerator's collectives (gather, reduce, broadcast, pad_across_processes), clip_grad_norm,
// main_process_first, and its errors, checked on every rank against values worked out here.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <unistd.h>

#include "support.h"

namespace test {

namespace {
std::vector<double> values(const Tensor& t) {
  std::vector<double> out;
  for (float v : to(t, DType::f32).to_vector<float>()) out.push_back(v);
  return out;
}
}  // namespace

TEST_CASE("gather concatenates every rank's rows in rank order, also when the row counts differ") {
  Accelerator accelerator(options());
  const int n = accelerator.num_processes(), rank = accelerator.process_index();
  INFO("rank ", rank, " of ", n);
  // Rank r holds r + 1 rows of 3 columns; element (i, c) is 100 r + 10 i + c.
  std::vector<float> mine;
  for (int i = 0; i <= rank; ++i)
    for (int c = 0; c < 3; ++c) mine.push_back(static_cast<float>(100 * rank + 10 * i + c));
  const Tensor gathered = accelerator.gather(from_vector(mine, {rank + 1, 3}));
  std::vector<double> expected;
  for (int r = 0; r < n; ++r)
    for (int i = 0; i <= r; ++i)
      for (int c = 0; c < 3; ++c) expected.push_back(100 * r + 10 * i + c);
  CHECK(gathered.shape() == Shape{n * (n + 1) / 2, 3});
  CHECK(values(gathered) == expected);

  // Equal rows, i64, and a 0-d tensor that counts as one row each.
  const Tensor ids = accelerator.gather(from_vector(std::vector<int64_t>{rank, 10 + rank}));
  std::vector<int64_t> expected_ids;
  for (int r = 0; r < n; ++r) expected_ids.insert(expected_ids.end(), {r, 10 + r});
  CHECK(ids.to_vector<int64_t>() == expected_ids);
  const Tensor scalars = accelerator.gather(scalar_tensor(rank * 2.0));
  std::vector<double> expected_scalars;
  for (int r = 0; r < n; ++r) expected_scalars.push_back(2.0 * r);
  CHECK(values(scalars) == expected_scalars);
}

TEST_CASE("reduce sums or averages, broadcast copies one rank's tensor, pad_across_processes pads") {
  Accelerator accelerator(options());
  const int n = accelerator.num_processes(), rank = accelerator.process_index();
  INFO("rank ", rank, " of ", n);
  const Tensor mine = full({2, 2}, rank + 1.0);
  CHECK(values(accelerator.reduce(mine, "sum")) == std::vector<double>(4, n * (n + 1) / 2.0));
  CHECK(values(accelerator.reduce(mine, "mean")) == std::vector<double>(4, (n + 1) / 2.0));
  CHECK(values(mine) == std::vector<double>(4, rank + 1.0));  // the input is left alone

  const Tensor from_last = accelerator.broadcast(from_vector(std::vector<float>{1.0f * rank, 5, 6}), n - 1);
  CHECK(values(from_last) == std::vector<double>{n - 1.0, 5, 6});

  // Rank r holds [2, r + 1] ones; padded along dim 1 to [2, n] with -1, after or before.
  const Tensor ragged = ones({2, rank + 1});
  for (const bool pad_first : {false, true}) {
    const Tensor padded = accelerator.pad_across_processes(ragged, 1, -1, pad_first);
    CHECK(padded.shape() == Shape{2, n});
    std::vector<double> expected;
    for (int row = 0; row < 2; ++row)
      for (int c = 0; c < n; ++c) {
        const bool real = pad_first ? c >= n - (rank + 1) : c < rank + 1;
        expected.push_back(real ? 1 : -1);
      }
    CHECK(values(padded) == expected);
  }
  // Padded, the ragged tensors gather.
  CHECK(accelerator.gather(accelerator.pad_across_processes(ragged, -1)).shape() == Shape{2 * n, n});
}

TEST_CASE("reduce takes a ReduceOp: sum, avg, max and min of every rank's tensor; ranks asking differently fail together") {
  Accelerator accelerator(options());
  const int n = accelerator.num_processes(), rank = accelerator.process_index();
  INFO("rank ", rank, " of ", n);
  // Rank r holds [r + 1, 10 - r]: the max of the first element is n, of the second 10.
  const Tensor mine = from_vector(std::vector<float>{rank + 1.0f, 10.0f - rank});
  CHECK(values(accelerator.reduce(mine)) == std::vector<double>{n * (n + 1) / 2.0, 10.0 * n - n * (n - 1) / 2.0});
  CHECK(values(accelerator.reduce(mine, ReduceOp::avg)) == std::vector<double>{(n + 1) / 2.0, 10.0 - (n - 1) / 2.0});
  CHECK(values(accelerator.reduce(mine, ReduceOp::max)) == std::vector<double>{1.0 * n, 10.0});
  CHECK(values(accelerator.reduce(mine, ReduceOp::min)) == std::vector<double>{1.0, 11.0 - n});
  if (n == 1) return;
  CHECK(error_of([&] { accelerator.reduce(mine, rank == 0 ? ReduceOp::max : ReduceOp::avg); }) ==
        (rank == 0 ? "Accelerator::reduce: the ranks ask for different reductions (rank 0 for max, rank 1 for mean)"
                   : fmt::format("Accelerator::reduce: the ranks ask for different reductions (rank {} for avg, rank 0 "
                                 "for max)",
                                 rank)));
  CHECK(values(accelerator.reduce(ones({1}))) == std::vector<double>{static_cast<double>(n)});
}

TEST_CASE("the collectives fail together, with one message on every rank, when the ranks disagree, also on the "
          "collective itself") {
  Accelerator accelerator(options());
  const int n = accelerator.num_processes(), rank = accelerator.process_index();
  INFO("rank ", rank, " of ", n);
  CHECK(error_of([&] { accelerator.reduce(ones({2}), "max"); }) ==
        "Accelerator::reduce: reduction 'max' is not supported; expected sum or mean");
  CHECK(error_of([&] { accelerator.broadcast(ones({2}), n); }) ==
        fmt::format("Accelerator::broadcast: from = {} is not a rank of {}", n, n));
  CHECK(error_of([&] { accelerator.pad_across_processes(ones({2}), 1); }) ==
        "Accelerator::pad_across_processes: dim 1 is out of range for rank 0's shape [2]");
  if (n == 1) return;  // one process cannot disagree with itself
  std::string shapes;
  for (int r = 0; r < n; ++r) shapes += fmt::format("{}rank {} [2, {}]", r ? ", " : "", r, r == 0 ? 3 : 4);
  const Tensor odd = ones({2, rank == 0 ? 3 : 4});
  CHECK(error_of([&] { accelerator.gather(odd); }) ==
        "Accelerator::gather: the ranks' tensors differ beyond dim 0: " + shapes);
  CHECK(error_of([&] { accelerator.reduce(odd); }) == "Accelerator::reduce: the ranks' shapes differ: " + shapes);
  CHECK(error_of([&] { accelerator.gather(ones({2}, rank == 0 ? DType::f32 : DType::f64)); }) ==
        "Accelerator::gather: rank 0 passed f32 but rank 1 passed f64");
  CHECK(error_of([&] { accelerator.broadcast(ones({2}), rank == 0 ? 0 : 1); }) ==
        "Accelerator::broadcast: the ranks broadcast from different ranks (rank 0 from 0, rank 1 from 1)");
  CHECK(error_of([&] { accelerator.reduce(ones({2}), rank == 0 ? "sum" : "max"); }) ==
        (rank == 0 ? "Accelerator::reduce: the ranks ask for different reductions (rank 0 for sum, rank 1 for an "
                     "unsupported reduction)"
                   : "Accelerator::reduce: reduction 'max' is not supported; expected sum or mean"));
  CHECK(error_of([&] { accelerator.pad_across_processes(rank == 0 ? ones({2}) : ones({2, 2}), 1); }) ==
        "Accelerator::pad_across_processes: dim 1 is out of range for rank 0's shape [2]");
  // Different collectives: without the check, reduce on rank 0 against broadcast elsewhere hangs.
  CHECK(error_of([&] { rank == 0 ? accelerator.reduce(ones({2})) : accelerator.broadcast(ones({2}), 0); }) ==
        "Accelerator: rank 0 called reduce but rank 1 called broadcast; every rank must call the same collectives in "
        "the same order");
  CHECK(error_of([&] { rank == 0 ? accelerator.gather(ones({2})) : accelerator.gather_for_metrics(ones({2})); }) ==
        "Accelerator: rank 0 called gather but rank 1 called gather_for_metrics; every rank must call the same "
        "collectives in the same order");
  // The communicator is still in step after the failures.
  CHECK(values(accelerator.reduce(ones({1}))) == std::vector<double>{static_cast<double>(n)});
}

TEST_CASE("clip_grad_norm returns the global norm of the synchronised grads and scales them to max_norm") {
  Accelerator accelerator(options());
  const int n = accelerator.num_processes(), rank = accelerator.process_index();
  INFO("rank ", rank, " of ", n);
  Generator gen(1);
  auto model = std::make_shared<nn::Linear>(4, 1, false, gen);
  auto net = accelerator.prepare(model);
  // Rank r's grad is (r + 1) * [1, 2, 3, 4]; the average is (n + 1) / 2 times that.
  accelerator.backward(sum(net->weight() * from_vector(std::vector<float>{1, 2, 3, 4}, {1, 4}) * (rank + 1.0)));
  const double scale = (n + 1) / 2.0;
  const double norm = scale * std::sqrt(30.0);
  CHECK(accelerator.clip_grad_norm(*net, 1e9) == doctest::Approx(norm).epsilon(1e-6));  // no clipping
  CHECK(values(net->weight().grad()) == std::vector<double>{scale, 2 * scale, 3 * scale, 4 * scale});
  CHECK(accelerator.clip_grad_norm(*net, 2.0, INFINITY) == doctest::Approx(4 * scale).epsilon(1e-6));
  const double returned = accelerator.clip_grad_norm(*net, 1.0);
  CHECK(returned == doctest::Approx(2.0 / (4 * scale + 1e-6) * norm).epsilon(1e-5));
  double clipped = 0;
  for (double g : values(net->weight().grad())) clipped += g * g;
  CHECK(std::sqrt(clipped) == doctest::Approx(1.0).epsilon(1e-5));
  for (double r : all_ranks(returned)) CHECK(r == returned);
  CHECK(error_of([&] { accelerator.clip_grad_norm(*net, 1.0, 0.0); }) ==
        "Accelerator::clip_grad_norm: norm_type must be > 0 or inf, got 0");
}

TEST_CASE("main_process_first: the others enter their scope after the main process has left its own") {
  Accelerator accelerator(options());
  // The ranks share their parent (mpirun), so they agree on the name.
  const std::filesystem::path marker =
      std::filesystem::temp_directory_path() / fmt::format("accel_main_first_{}", static_cast<long>(getppid()));
  if (accelerator.is_main_process()) std::filesystem::remove(marker);
  accelerator.wait_for_everyone();
  {
    auto scope = accelerator.main_process_first();
    if (accelerator.is_main_process()) {
      // Slow on purpose: if the others did not wait, they would look before the file exists.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::ofstream(marker) << "made by the main process\n";
    } else {
      CHECK(std::filesystem::exists(marker));
    }
  }
  accelerator.wait_for_everyone();
  if (accelerator.is_main_process()) std::filesystem::remove(marker);
}

TEST_CASE("settings: bad backend names, nccl without NCCL, and bad bucket caps are clear errors") {
  CHECK(error_of([] { Accelerator a(options("gloo")); }) ==
        "Accelerator: backend 'gloo' from code is not valid; expected auto, mpi, ring or nccl");
#if ACCEL_WITH_NCCL
  if (cuda_device_count() == 0)  // with a GPU per rank this would build an NCCL communicator
    CHECK(error_of([] { Accelerator a(options("nccl")); }) ==
          "Accelerator: backend nccl (from code) needs a GPU, but the device is cpu (no CUDA device is visible); use "
          "auto, mpi or ring");
#else
  CHECK(error_of([] { Accelerator a(options("nccl")); }) ==
        "Accelerator: backend nccl (from code) is not available: this build has no NCCL; use auto, mpi or ring");
#endif
  AcceleratorOptions o = options();
  o.bucket_cap_mb = -1;
  CHECK(error_of([&] { Accelerator a(o); }) ==
        "Accelerator: bucket_cap_mb '-1' from code is not valid; expected a number of MiB > 0");
  Accelerator ring(options("ring"));
  CHECK(ring.backend() == std::string(ring.num_processes() > 1 ? "ring" : "none"));
  CHECK(ring.settings().backend.value == Backend::ring);
  Accelerator plain(options());
  CHECK(plain.backend() == std::string(plain.num_processes() > 1 ? "mpi" : "none"));
  CHECK((plain.communicator() == nullptr) == (plain.num_processes() == 1));
}

}  // namespace test

namespace test {

TEST_CASE("accumulate(model) and no_sync(model), Accelerate's spelling, act as accumulate() and no_sync()") {
  AcceleratorOptions o = options();
  o.gradient_accumulation_steps = 2;
  Accelerator accelerator(o);
  Generator gen(1);
  auto model = std::make_shared<nn::Linear>(2, 1, false, gen);
  auto optimizer = std::make_shared<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.1});
  auto [net, opt] = accelerator.prepare(model, optimizer);
  std::vector<bool> syncs;
  for (int i = 0; i < 4; ++i) {
    auto window = accelerator.accumulate(net);
    syncs.push_back(accelerator.sync_gradients());
  }
  CHECK(syncs == std::vector<bool>{false, true, false, true});
  // Under no_sync(net) each rank keeps the grad of its own input (rank + 1).
  const int rank = accelerator.process_index();
  {
    auto local = accelerator.no_sync(net);
    accelerator.backward(sum((*net)(full({1, 2}, rank + 1.0))));
  }
  CHECK(values(net->parameters()[0].grad()) == std::vector<double>{rank + 1.0, rank + 1.0});
}

}  // namespace test
