// Multi-rank tests on device tensors, run under mpirun (tests/gpu/run.sh runs -np 1 and -np 2, and
// with one GPU the ranks share it). The mpi backend stages device tensors through pinned host memory:
// every collective on CUDA tensors, and two ranks sharing a GPU train an MLP to the weights one rank
// reaches with the same global batch. ZeRO stages 1-3 through the Accelerator on device tensors (nccl
// for one rank, the staged mpi backend for ranks sharing the GPU) reach DDP's weights, and stage 3
// materialises a deferred-init model on the GPU. The nccl backend (one rank per GPU): every collective, the
// stream ordering of its Work, split and DeviceMesh, and a run that trains end to end through the
// Accelerator.
#include "accel_config.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/elementwise.h"
#include "tensor/nograd/matmul.h"
#include "tensor/nograd/reduce.h"
#include "tensor/nograd/views.h"
#include "tests/gpu/dist_support.h"
#include "tests/gpu/gpu_test.h"

#if ACCEL_WITH_NCCL
#include "collective/nccl_communicator.h"
#include "tensor/cuda/stream.h"
#endif

using namespace accel;
using namespace accel::gpu_test;

namespace {

// This rank's GPU: its own when there are enough, else they share cuda:0 .. cuda:n-1 round robin.
Device my_gpu() { return Device::cuda(world().rank() % cuda::device_count()); }

// values[i] = i % 13 + r, which every dtype holds exactly, as a CPU f64 tensor.
Tensor rank_values(int64_t n, int r) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i % 13 + r);
  return from_vector(v);
}

Tensor on(const Tensor& t, DType dtype, Device device) { return nograd::to_device(nograd::to_dtype(t, dtype), device); }

std::vector<double> host_values(const Tensor& t) {
  return nograd::to_dtype(nograd::to_device(t, Device::cpu()), DType::f64).to_vector<double>();
}

// Every collective of comm on device tensors against values worked out here. Values stay small
// integers, exact in every dtype, so the reduction order cannot matter.
void check_collectives(Communicator& comm, Device device, DType dtype) {
  const int size = comm.size(), rank = comm.rank();
  const std::string where = fmt::format("{} backend, rank {} of {}, {}", comm.backend(), rank, size, dtype_name(dtype));
  INFO(where);
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{3000017}}) {
    INFO("n = " << n);
    // all_reduce in place, sum and max; out of place, avg (of 2 * values: exact) and min.
    Tensor t = on(rank_values(n, rank), dtype, device);
    comm.all_reduce(t, ReduceOp::sum);
    std::vector<double> got = host_values(t);
    for (int64_t i = 0; i < n; ++i)
      REQUIRE(got[i] == static_cast<double>(size * (i % 13)) + size * (size - 1) / 2.0);
    t = on(rank_values(n, rank), dtype, device);
    comm.all_reduce(t, ReduceOp::max);
    got = host_values(t);
    for (int64_t i = 0; i < n; ++i) REQUIRE(got[i] == static_cast<double>(i % 13 + size - 1));
    const Tensor in = on(nograd::mul(rank_values(n, 0), static_cast<double>(2 * size)), dtype, device);
    Tensor out = on(rank_values(n, 0), dtype, device);
    comm.all_reduce(in, out, ReduceOp::avg);
    got = host_values(out);
    for (int64_t i = 0; i < n; ++i) REQUIRE(got[i] == static_cast<double>(2 * size * (i % 13)));
    comm.all_reduce(on(rank_values(n, rank), dtype, device), out, ReduceOp::min);
    got = host_values(out);
    for (int64_t i = 0; i < n; ++i) REQUIRE(got[i] == static_cast<double>(i % 13));
    // broadcast from the last rank.
    t = on(rank_values(n, rank), dtype, device);
    comm.broadcast(t, size - 1);
    got = host_values(t);
    for (int64_t i = 0; i < n; ++i) REQUIRE(got[i] == static_cast<double>(i % 13 + size - 1));
    // all_gather in place: this rank's part already sits in its slot.
    Tensor gathered = on(rank_values(size * n, 0), dtype, device);
    nograd::copy_(nograd::narrow(gathered, 0, rank * n, n), on(rank_values(n, rank), dtype, device));
    comm.all_gather(nograd::narrow(gathered, 0, rank * n, n), gathered);
    got = host_values(gathered);
    for (int r = 0; r < size; ++r)
      for (int64_t i = 0; i < n; ++i) REQUIRE(got[r * n + i] == static_cast<double>(i % 13 + r));
    // reduce_scatter in place: slot r of everyone's tensor holds values + r; its sum lands on rank r.
    Tensor whole = empty({size * n}, dtype, device);
    for (int r = 0; r < size; ++r) nograd::copy_(nograd::narrow(whole, 0, r * n, n), on(rank_values(n, r), dtype, device));
    const Tensor mine = nograd::narrow(whole, 0, rank * n, n);
    comm.reduce_scatter(whole, mine, ReduceOp::sum);
    got = host_values(mine);
    for (int64_t i = 0; i < n; ++i) REQUIRE(got[i] == static_cast<double>(size * (i % 13 + rank)));
    // gather to rank 0.
    Tensor at_root = rank == 0 ? empty({size, n}, dtype, device) : Tensor();
    comm.gather(on(rank_values(n, rank), dtype, device), at_root, 0);
    if (rank == 0) {
      got = host_values(at_root);
      for (int r = 0; r < size; ++r)
        for (int64_t i = 0; i < n; ++i) REQUIRE(got[r * n + i] == static_cast<double>(i % 13 + r));
    }
  }
  comm.barrier();
}

// hidden = 33 gives parameter sizes that divide by no world size above 1, so ZeRO's shards are padded.
std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed, int64_t hidden = 32) {
  Generator gen(seed);
  auto mlp = std::make_shared<nn::Sequential>();
  mlp->push_back(std::make_shared<nn::Linear>(8, hidden, true, gen));
  mlp->push_back(std::make_shared<nn::ReLU>());
  mlp->push_back(std::make_shared<nn::Linear>(hidden, 4, true, gen));
  return mlp;
}

// Step s's global batch: 64 samples of 8 features and a label that depends on them.
std::pair<Tensor, Tensor> global_batch(int step) {
  Generator gen(500 + static_cast<uint64_t>(step));
  const Tensor x = randn({64, 8}, gen);
  const std::vector<float> v = x.to_vector<float>();
  std::vector<int64_t> y(64);
  for (int64_t i = 0; i < 64; ++i) y[i] = (v[i * 8] > 0 ? 1 : 0) + (v[i * 8 + 1] > 0 ? 2 : 0);
  return {x, from_vector(y)};
}

// One rank runs nccl (it has a GPU of its own); ranks sharing the GPU take auto's mpi staging.
AcceleratorOptions zero_options(int stage) {
  AcceleratorOptions options;
  options.print_settings = false;
  if (ACCEL_WITH_NCCL && world().size() == 1) options.backend = "nccl";
  if (stage > 0) options.deepspeed_plugin = DeepSpeedPlugin{.zero_stage = stage, .gradient_accumulation_steps = std::nullopt};
  return options;
}

// 15 AdamW steps of stage `stage` on this rank's share of each global batch; the full weights after.
nn::StateDict train_zero_on_gpu(int stage, bool deferred) {
  const int size = world().size(), rank = world().rank();
  Accelerator accelerator(zero_options(stage));
  REQUIRE(accelerator.device().is_cuda());
  std::shared_ptr<nn::Sequential> model;
  if (deferred) {
    DeferredInit meta;
    model = make_mlp(3, 33);
  } else {
    model = make_mlp(3, 33);
  }
  auto optimizer = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 1e-2});
  auto [net, opt] = accelerator.prepare(model, optimizer);
  const Device device = accelerator.device();
  const int64_t local = 64 / size;
  for (int step = 0; step < 15; ++step) {
    const auto [x, y] = global_batch(step);
    opt->zero_grad();
    const Tensor xs = to(narrow(x, 0, rank * local, local), device), ys = to(narrow(y, 0, rank * local, local), device);
    accelerator.backward(nn::cross_entropy(net->forward(xs), ys));
    opt->step();
  }
  return accelerator.get_state_dict(*net);
}

}  // namespace

TEST_CASE("mpi backend: every collective on device tensors, staged through pinned memory") {
  for (DType dtype : {DType::f32, DType::bf16, DType::i64}) check_collectives(world(), my_gpu(), dtype);
}

TEST_CASE("mpi backend: send and recv of device tensors around the ring") {
  const int size = world().size(), rank = world().rank();
  if (size < 2) return;
  const Tensor out = on(rank_values(1001, rank), DType::f32, my_gpu());
  Tensor in = empty({1001}, DType::f32, my_gpu());
  Work sent = world().send_async(out, (rank + 1) % size, 5);
  world().recv(in, (rank + size - 1) % size, 5);
  sent.wait();
  CHECK(host_values(in) == host_values(rank_values(1001, (rank + size - 1) % size)));
}

TEST_CASE("mpi backend: a recv lands after the compute-stream work queued on its buffer") {
  // The staged copy back to the device runs on the legacy stream. Unless the compute stream is
  // drained first, the fill queued there behind the matmuls runs after it and overwrites what came.
  const int size = world().size(), rank = world().rank();
  if (size < 2) return;
  const int64_t n = int64_t{1} << 22;
  const Tensor out = on(rank_values(n, rank), DType::f32, my_gpu());
  Tensor in = empty({n}, DType::f32, my_gpu());
  const Tensor busy = random({4096, 4096}, DType::f32, my_gpu(), 17);
  for (int i = 0; i < 4; ++i) (void)nograd::matmul(busy, busy);
  nograd::fill_(in, -1.0);
  Work sent = world().send_async(out, (rank + 1) % size, 6);
  world().recv(in, (rank + size - 1) % size, 6);
  sent.wait();
  CHECK(host_values(in) == host_values(rank_values(n, (rank + size - 1) % size)));
}

TEST_CASE("mpi backend: ranks sharing a GPU train an MLP to the weights one rank reaches") {
  const int size = world().size(), rank = world().rank();
  const Device device = my_gpu();
  auto reference = make_mlp(3), parallel = make_mlp(3);
  reference->to(device);
  parallel->to(device);
  optim::AdamW ref_opt(reference->parameters(), optim::AdamWOptions{.lr = 1e-2});
  optim::AdamW par_opt(parallel->parameters(), optim::AdamWOptions{.lr = 1e-2});
  const int64_t local = 64 / size;
  for (int step = 0; step < 15; ++step) {
    const auto [x, y] = global_batch(step);
    // One rank, the whole batch.
    ref_opt.zero_grad();
    backward(nn::cross_entropy(reference->forward(to(x, device)), to(y, device)));
    ref_opt.step();
    // This rank's share of the batch, then the mean of the ranks' gradients.
    par_opt.zero_grad();
    const Tensor xs = to(narrow(x, 0, rank * local, local), device), ys = to(narrow(y, 0, rank * local, local), device);
    backward(nn::cross_entropy(parallel->forward(xs), ys));
    std::vector<Work> pending;
    for (const Tensor& p : parallel->parameters()) pending.push_back(world().all_reduce_async(p.grad(), ReduceOp::avg));
    for (Work& w : pending) w.wait();
    par_opt.step();
  }
  const auto got = parallel->named_parameters(), want = reference->named_parameters();
  for (size_t i = 0; i < got.size(); ++i) check_close(got[i].second, want[i].second, 1e-4, 1e-5, got[i].first);
  // And every rank holds the same weights: rank 0's, broadcast, equal this rank's.
  for (const auto& [name, p] : got) {
    const Tensor theirs = nograd::clone(p);
    world().broadcast(theirs, 0);
    CHECK_MESSAGE(host_values(theirs) == host_values(p), name);
  }
}

TEST_CASE("accelerator: ranks on GPUs train through the reducer to the weights one rank reaches") {
  // auto: nccl when each rank has a GPU of its own, else the mpi backend staging the shared GPU.
  const int size = world().size(), rank = world().rank();
  AcceleratorOptions options;
  options.print_settings = false;
  options.bucket_cap_mb = 0.001;  // several buckets, so all-reduces start during backward
  Accelerator accelerator(options);
  REQUIRE(accelerator.device().is_cuda());
  if (size > 1) CHECK(accelerator.backend() == (ACCEL_WITH_NCCL && cuda::device_count() >= size ? "nccl" : "mpi"));
  const Device device = accelerator.device();
  auto reference = make_mlp(3);
  reference->to(device);
  optim::AdamW ref_opt(reference->parameters(), optim::AdamWOptions{.lr = 1e-2});
  auto model = make_mlp(3);
  auto optimizer = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 1e-2});
  auto [net, opt] = accelerator.prepare(model, optimizer);
  const int64_t local = 64 / size;
  for (int step = 0; step < 15; ++step) {
    const auto [x, y] = global_batch(step);
    ref_opt.zero_grad();
    backward(nn::cross_entropy(reference->forward(to(x, device)), to(y, device)));
    ref_opt.step();
    opt->zero_grad();
    const Tensor xs = to(narrow(x, 0, rank * local, local), device), ys = to(narrow(y, 0, rank * local, local), device);
    accelerator.backward(nn::cross_entropy(net->forward(xs), ys));
    opt->step();
  }
  if (size > 1) {
    const Reducer* reducer = accelerator.reducer(*net);
    REQUIRE(reducer != nullptr);
    CHECK(reducer->buckets().size() > 1);
  }
  const auto got = net->named_parameters(), want = reference->named_parameters();
  for (size_t i = 0; i < got.size(); ++i) check_close(got[i].second, want[i].second, 1e-4, 1e-5, got[i].first);
}

TEST_CASE("zero: stages 1, 2 and 3 on GPUs train to DDP's weights; stage 3 materialises a deferred model there") {
  const nn::StateDict ddp = train_zero_on_gpu(0, false);
  for (const int stage : {1, 2, 3}) {
    for (const bool deferred : {false, true}) {
      if (deferred && stage != 3) continue;
      INFO("rank ", world().rank(), " of ", world().size(), ", stage ", stage, deferred ? ", deferred init" : "");
      const nn::StateDict got = train_zero_on_gpu(stage, deferred);
      REQUIRE(got.size() == ddp.size());
      for (size_t i = 0; i < got.size(); ++i) {
        CHECK(got[i].first == ddp[i].first);
        check_close(to(got[i].second, Device::cpu()), to(ddp[i].second, Device::cpu()), 1e-5, 1e-6, got[i].first);
      }
    }
  }
}

#if ACCEL_WITH_NCCL

TEST_CASE("nccl: every collective on device tensors, in every dtype") {
  NcclCommunicator nccl(my_gpu(), world());
  CHECK(std::string(nccl.backend()) == "nccl");
  CHECK(nccl.rank() == world().rank());
  CHECK(nccl.size() == world().size());
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64, DType::i64, DType::i32})
    check_collectives(nccl, my_gpu(), dtype);
  // bool: sum and max are or, min is and.
  Tensor flags = on(from_vector<double>({0, 1, 0, 1}), DType::boolean, my_gpu());
  nccl.all_reduce(flags, ReduceOp::sum);
  CHECK(host_values(flags) == std::vector<double>{0, 1, 0, 1});
  const auto copy = nccl.dup();
  check_collectives(*copy, my_gpu(), DType::f32);
  const std::string message = error_of([&] { nccl.all_reduce(full({3}, 1.0, DType::f32)); });
  CHECK(message == fmt::format("all_reduce (nccl): tensor is on cpu, but this communicator runs on {}", my_gpu().str()));
}

namespace {

// The sum over comm of world rank r's 10^r, all-reduced on the device: it names the members of comm.
double sum_of_powers(Communicator& comm) {
  Tensor t = on(from_vector<double>({std::pow(10.0, world().rank())}), DType::f64, my_gpu());
  comm.all_reduce(t);
  return host_values(t)[0];
}

}  // namespace

TEST_CASE("nccl: split into parity groups with reversed keys, kNoColor, and a mesh over the world") {
  NcclCommunicator nccl(my_gpu(), world());
  const int n = nccl.size(), r = nccl.rank();
  const auto part = nccl.split(r % 2, -r);
  REQUIRE(part != nullptr);
  CHECK(std::string(part->backend()) == "nccl");
  const int group_size = r % 2 == 0 ? (n + 1) / 2 : n / 2;
  CHECK(part->size() == group_size);
  CHECK(part->rank() == group_size - 1 - r / 2);
  double group_sum = 0;
  for (int q = r % 2; q < n; q += 2) group_sum += std::pow(10.0, q);
  CHECK(sum_of_powers(*part) == group_sum);
  check_collectives(*part, my_gpu(), DType::f32);
  CHECK(nccl.split(kNoColor, r) == nullptr);
  CHECK_THROWS_WITH_AS(nccl.split(-3, r),
                       "split: color -3 is negative; expected a color >= 0, or kNoColor (-1) to join no group", Error);

  const DeviceMesh mesh(nccl, {{"dp", n}, {"tp", 1}});
  CHECK(mesh.comm("dp").size() == n);
  CHECK(mesh.comm("tp").size() == 1);
  double world_sum = 0;
  for (int q = 0; q < n; ++q) world_sum += std::pow(10.0, q);
  CHECK(sum_of_powers(mesh.comm("dp")) == world_sum);
  CHECK(sum_of_powers(mesh.comm("tp")) == std::pow(10.0, r));
  nccl.barrier();
}

TEST_CASE("nccl: wait() orders the compute stream after the operation without blocking the host") {
  NcclCommunicator nccl(my_gpu(), world());
  const int64_t n = int64_t{1} << 26;  // 256 MB: long enough to still run when the host moves on
  Tensor t = full({n}, 1.0, DType::f32, my_gpu());
  Work w = nccl.all_reduce_async(t, ReduceOp::sum);
  w.wait();                                  // the compute stream now waits for the all-reduce
  const Tensor doubled = nograd::mul(t, 2.0);   // queued behind it
  const double expected = 2.0 * world().size();
  CHECK(nograd::to_device(nograd::narrow(doubled, 0, n - 3, 3), Device::cpu()).to_vector<float>() ==
        std::vector<float>(3, static_cast<float>(expected)));
  CHECK(nograd::sum(doubled).item() == doctest::Approx(expected * static_cast<double>(n)));
  CHECK(w.test());
  nccl.barrier();
}

TEST_CASE("nccl: a one-rank run trains end to end through the Accelerator") {
  if (world().size() != 1) return;
  AcceleratorOptions options;
  options.print_settings = false;
  options.backend = "nccl";
  Accelerator accelerator(options);
  REQUIRE(accelerator.device().is_cuda());
  CHECK(accelerator.backend() == "nccl");
  Generator gen(11);
  const Tensor x = randn({512, 8}, gen);
  std::vector<int64_t> labels(512);
  const std::vector<float> v = x.to_vector<float>();
  for (int64_t i = 0; i < 512; ++i) labels[i] = (v[i * 8] > 0 ? 1 : 0) + (v[i * 8 + 1] > 0 ? 2 : 0);
  auto data = std::make_shared<TensorDataset>(std::vector<Tensor>{x, from_vector(labels)});
  // The same loop without the Accelerator: one rank's average over NCCL must change nothing.
  auto reference = make_mlp(4);
  reference->to(accelerator.device());
  optim::AdamW ref_opt(reference->parameters(), optim::AdamWOptions{.lr = 1e-2});
  auto model = make_mlp(4);
  auto optimizer = std::make_shared<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 1e-2});
  DataLoader loader(data, {.batch_size = 32, .shuffle = true, .seed = 2});
  auto [net, opt, batches] = accelerator.prepare(model, optimizer, loader);
  REQUIRE(accelerator.reducer(*net) != nullptr);
  double first = 0, last = 0;
  for (int epoch = 0; epoch < 8; ++epoch) {
    batches.set_epoch(epoch);
    for (const Batch& batch : batches) {
      opt->zero_grad();
      const Tensor loss = nn::cross_entropy(net->forward(batch[0]), batch[1]);
      accelerator.backward(loss);
      opt->step();
      ref_opt.zero_grad();
      backward(nn::cross_entropy(reference->forward(batch[0]), batch[1]));
      ref_opt.step();
      last = loss.item();
      if (first == 0) first = last;
    }
  }
  MESSAGE(fmt::format("loss through the Accelerator on nccl: {:.4f} -> {:.4f}", first, last));
  CHECK(last < 0.5 * first);
  // Gradient sync ran through the reducer's buckets.
  bool launched = false;
  for (const ReducerEvent& e : accelerator.reducer(*net)->events())
    launched = launched || e.kind == ReducerEvent::Kind::bucket_launched;
  CHECK(launched);
  const auto got = net->named_parameters(), want = reference->named_parameters();
  for (size_t i = 0; i < got.size(); ++i) check_close(got[i].second, want[i].second, 1e-6, 1e-7, got[i].first);
}

#endif
