// FSDP's HYBRID_SHARD: stage 3 within shard groups, the shard grads all-reduced across the replicas.
// It trains as DDP does (same global batch and init, 20 steps, with and without accumulation, in f32,
// bf16 and fp16) on every mesh the world allows (4 ranks: 1 x 4, 2 x 2, 4 x 1); its collectives are
// counted on each of its two communicators; its shard grads are the world's average of the rank's slice; its
// checkpoints are written by replica 0 and load under DDP and FULL_SHARD; bad meshes are refused
// naming both settings.
#include <filesystem>

#include "counting_communicator.h"
#include "tensor/nograd/copy.h"
#include "zero_support.h"

namespace test {

namespace {

namespace fs = std::filesystem;

// The shard sizes that divide the world: every mesh dp_replicate x dp_shard it allows.
std::vector<int> shard_sizes() {
  std::vector<int> sizes;
  for (int s = 1; s <= world()->size(); ++s)
    if (world()->size() % s == 0) sizes.push_back(s);
  return sizes;
}

std::string hybrid_name(int shard_size) {
  return fmt::format("hybrid_shard (dp_replicate={} x dp_shard={})", world()->size() / shard_size, shard_size);
}

ZeroSpec hybrid_spec(int shard_size) {
  return {.zero_stage = 3, .fsdp = true, .hybrid_shard_size = shard_size};
}

void check_equal_to_ddp(ZeroSpec spec, double tolerance, const std::string& expected_strategy) {
  ZeroSpec ddp_spec = spec;
  ddp_spec.zero_stage = 0;
  ddp_spec.fsdp = false;
  ddp_spec.hybrid_shard_size = 0;
  ddp_spec.hybrid_by_node = false;
  const ZeroRun ddp = train_zero(ddp_spec, 21);
  const ZeroRun hybrid = train_zero(spec, 21);
  REQUIRE(hybrid.losses.size() == static_cast<size_t>(spec.steps * spec.accumulation_steps));
  REQUIRE(hybrid.norms.size() == ddp.norms.size());
  const double losses = max_rel_diff(hybrid.losses, ddp.losses), weights = rel_diff(hybrid.weights, ddp.weights);
  const double norms = hybrid.norms.empty() ? 0 : max_rel_diff(hybrid.norms, ddp.norms);
  INFO("losses differ by ", losses, " relative, weights by ", weights, ", norms by ", norms);
  CHECK(ddp.strategy == "data_parallel");
  CHECK(hybrid.strategy == expected_strategy);
  CHECK(losses <= tolerance);
  CHECK(weights <= tolerance);
  CHECK(norms <= tolerance);
  CHECK(max_abs_diff(ddp.weights, weights_of(*make_zero_model(spec, 21))) > 1e-2);  // training moved them
  CHECK(differs_across_ranks(hybrid.weights) == "");
}

void check_equal_to_ddp(ZeroSpec spec, double tolerance) {
  check_equal_to_ddp(spec, tolerance, hybrid_name(spec.hybrid_shard_size));
}

Tensor loss_of(nn::Module& model, int64_t seed) {
  Generator gen(static_cast<uint64_t>(seed));
  return nn::mse_loss(model(randn({4, 7}, gen)), randn({4, 3}, gen));
}

int total(const CountingCommunicator& c) {
  int n = 0;
  for (const char* kind : {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "gather", "barrier", "send", "recv"})
    n += c.count(kind);
  return n;
}

}  // namespace

TEST_CASE("HYBRID_SHARD equals DDP in f32 over 20 steps on every mesh, with and without accumulation") {
  for (const int shard_size : shard_sizes()) {
    for (const std::string optimizer : {"sgd", "adamw"}) {
      for (const int k : {1, 3}) {
        INFO("rank ", world()->rank(), ", ", hybrid_name(shard_size), ", ", optimizer, ", accumulation ", k);
        ZeroSpec spec = hybrid_spec(shard_size);
        spec.optimizer = optimizer;
        spec.accumulation_steps = k;
        check_equal_to_ddp(spec, 1e-6);
      }
    }
  }
}

TEST_CASE("HYBRID_SHARD skips a parameter no rank gave a grad, as DDP does, on every mesh") {
  for (const int shard_size : shard_sizes()) {
    for (const std::string optimizer : {"sgd", "adamw"}) {
      INFO("rank ", world()->rank(), ", ", hybrid_name(shard_size), ", ", optimizer);
      ZeroSpec spec = hybrid_spec(shard_size);
      spec.optimizer = optimizer;
      spec.accumulation_steps = 2;
      spec.gated = true;
      check_equal_to_ddp(spec, 1e-6);
    }
  }
}

TEST_CASE("HYBRID_SHARD_ZERO2 keeps its units gathered from forward to backward and equals DDP") {
  for (const int shard_size : shard_sizes()) {
    INFO("rank ", world()->rank(), ", ", hybrid_name(shard_size));
    AcceleratorOptions o = options();
    o.fsdp_plugin = FSDPPlugin{.sharding_strategy = ShardingStrategy::hybrid_shard_zero2, .auto_wrap = {},
                               .hybrid_shard_size = shard_size};
    const Accelerator accelerator(o);
    const auto* hybrid = dynamic_cast<const HybridShard*>(&accelerator.strategy());
    REQUIRE(hybrid != nullptr);
    CHECK_FALSE(hybrid->reshard_after_forward());
    for (const int k : {1, 3}) {
      ZeroSpec spec = hybrid_spec(shard_size);
      spec.hybrid_zero2 = true;
      spec.accumulation_steps = k;
      check_equal_to_ddp(spec, 1e-6);
    }
  }
}

TEST_CASE("HYBRID_SHARD equals DDP with parameter groups, wrapping by parameter count and the ring backend") {
  for (const int shard_size : shard_sizes()) {
    INFO("rank ", world()->rank(), ", ", hybrid_name(shard_size));
    ZeroSpec groups = hybrid_spec(shard_size);
    groups.optimizer = "adamw_groups";
    check_equal_to_ddp(groups, 1e-6);
    ZeroSpec by_count = hybrid_spec(shard_size);
    by_count.auto_wrap = {.min_num_params = 60};
    by_count.accumulation_steps = 2;
    by_count.backend = "ring";
    check_equal_to_ddp(by_count, 1e-6);
  }
}

TEST_CASE("HYBRID_SHARD equals DDP under bf16 and fp16 (the overflow agreed), with clipping (the global norm) and "
          "accumulation") {
  for (const int shard_size : shard_sizes()) {
    for (const std::string precision : {"bf16", "fp16"}) {
      for (const int k : {1, 2}) {
        INFO("rank ", world()->rank(), ", ", hybrid_name(shard_size), ", ", precision, ", accumulation ", k);
        ZeroSpec spec = hybrid_spec(shard_size);
        spec.accumulation_steps = k;
        spec.mixed_precision = precision;
        spec.clip_norm = 0.05;  // clips most steps: the norm must be the global one
        // The f32 masters are sharded and the grads 16-bit (docs/zero.md), so the reference is DDP
        // with its all-reduce in 16-bit too. HYBRID_SHARD averages in two 16-bit roundings (within the
        // shard group, then across the replicas) and, under accumulation, per micro-step: within
        // bf16's and f16's rounding carried through 20 AdamW steps, as stage 3's accumulation
        // (test_equivalence.cpp), and at loss scale 2^10 so that no sum order overflows.
        spec.grad_comm_dtype = "compute";
        if (precision == "fp16") spec.loss_scale = 1024;
        check_equal_to_ddp(spec, 3e-2);
      }
    }
  }
}

TEST_CASE("HYBRID_SHARD's collectives per communicator: stage 3's on the shard group, one all-reduce per unit "
          "across the replicas on a syncing backward") {
  for (const int shard_size : shard_sizes()) {
    const int replicas = world()->size() / shard_size;
    const DeviceMesh mesh(*world(), {{"dp_replicate", replicas}, {"dp_shard", shard_size}});
    for (const bool accumulate : {false, true}) {
      INFO("rank ", world()->rank(), ", ", hybrid_name(shard_size), accumulate ? ", an early micro-step" : ", a syncing backward");
      auto shard = std::make_shared<CountingCommunicator>(mesh.comm("dp_shard").dup());
      auto replicate = std::make_shared<CountingCommunicator>(mesh.comm("dp_replicate").dup());
      HybridShard strategy(Device::cpu(), shard, replicate, DType::f32, AutoWrapPolicy{}, true);
      auto model = make_odd_mlp(5);
      auto reference = make_odd_mlp(5);  // the same weights, for the world's average grads
      auto sgd = make_optimizer("sgd", model->parameters());
      strategy.prepare_model(*model);
      strategy.prepare_optimizer(*sgd);
      CHECK(strategy.data_shard().rank == world()->rank());
      CHECK(strategy.data_shard().world_size == world()->size());
      const std::vector<const FlatUnit*> units = strategy.units_of(*model);
      REQUIRE(units.size() == 3);  // each Linear
      for (const FlatUnit* unit : units) CHECK(unit->shard_numel() == unit->padded_numel() / shard_size);
      shard->reset();
      replicate->reset();
      const Tensor loss = loss_of(*model, world()->rank());
      CHECK(shard->count("all_gather") == 3);  // one per unit in forward
      CHECK(total(*shard) == 3);
      CHECK(total(*replicate) == 0);
      shard->reset();
      strategy.clear_events();
      strategy.before_backward(!accumulate);
      backward(loss);
      strategy.after_backward();
      // The replicas' all-reduces start during backward: a unit's, once the next unit's reduce-scatter
      // has started, so the first starts before the last reduce-scatter; each after its own unit's.
      std::vector<ZeroEvent> sync_order;
      for (const ZeroEvent& e : strategy.events())
        if (e.kind == ZeroEvent::Kind::reduce_scatter || e.kind == ZeroEvent::Kind::replica_all_reduce)
          sync_order.push_back(e);
      if (!accumulate && replicas > 1) {
        REQUIRE(sync_order.size() == 6);
        const auto rs = ZeroEvent::Kind::reduce_scatter, ar = ZeroEvent::Kind::replica_all_reduce;
        const std::vector<ZeroEvent::Kind> kinds = {rs, rs, ar, rs, ar, ar};
        for (size_t i = 0; i < 6; ++i) CHECK(sync_order[i].kind == kinds[i]);
        CHECK(sync_order[2].unit == sync_order[0].unit);
        CHECK(sync_order[4].unit == sync_order[1].unit);
        CHECK(sync_order[5].unit == sync_order[3].unit);
      } else {
        CHECK(sync_order.size() == 3);  // the reduce-scatters alone
      }
      CHECK(shard->count("all_gather") == 3);      // one per unit in backward
      CHECK(shard->count("reduce_scatter") == 3);  // one per unit
      CHECK(total(*shard) == 6);
      // The algorithm fixes one all-reduce per unit on a syncing backward (none with one replica, whose
      // reduce-scatter is the world's already), and none on an early micro-step.
      const int expected = accumulate || replicas == 1 ? 0 : 3;
      CHECK(replicate->count("all_reduce") == expected);
      CHECK(total(*replicate) == expected);
      if (!accumulate) {
        // Each rank's shard grad is the world's average grad of its slice, as DDP's all-reduce gives.
        backward(loss_of(*reference, world()->rank()));
        const std::vector<Tensor> ref_params = reference->parameters(), params = model->parameters();
        const std::vector<Tensor> grads = strategy.local_grads(params);
        REQUIRE(grads.size() == units.size());
        for (size_t u = 0; u < units.size(); ++u) {
          const FlatUnit& unit = *units[u];
          Tensor flat = zeros({unit.padded_numel()});
          for (size_t j = 0; j < unit.params().size(); ++j)
            for (size_t i = 0; i < params.size(); ++i)
              if (params[i].impl() == unit.params()[j].impl()) nograd::copy_(unit.param_view(flat, j), ref_params[i].grad());
          world()->all_reduce(flat, ReduceOp::avg);
          const std::vector<float> want = contiguous(unit.shard_of(flat)).to_vector<float>();
          const std::vector<float> got = contiguous(grads[u]).to_vector<float>();
          INFO("unit ", u);
          CHECK(max_abs_diff({got.begin(), got.end()}, {want.begin(), want.end()}) <= 1e-6);
        }
      }
      shard->reset();
      replicate->reset();
      strategy.optimizer_step(*sgd);
      // One all-reduce of a flag per parameter (which have a grad on some rank) along each dim with
      // more than one rank; nothing is gathered: the next forward gathers.
      CHECK(shard->count("all_reduce") == (shard_size > 1 ? 1 : 0));
      CHECK(total(*shard) == shard->count("all_reduce"));
      CHECK(replicate->count("all_reduce") == (replicas > 1 ? 1 : 0));
      CHECK(total(*replicate) == replicate->count("all_reduce"));
      // What the rank holds is 1/S of each unit: parameters, grads and SGD's momentum, 4 bytes each.
      int64_t slice_bytes = 0;
      for (const FlatUnit* unit : units) slice_bytes += unit->padded_numel() / shard_size * 4;
      const ZeroStrategy::HeldBytes held = strategy.held_bytes();
      CHECK(held.parameters == slice_bytes);
      CHECK(held.gradients == slice_bytes);
      CHECK(held.optimizer_state == slice_bytes);
      // Checkpoint shards: part r of the shard group, written by replica 0 only.
      const std::optional<StateShard> part = strategy.model_state_shard(*model);
      REQUIRE(part.has_value());
      CHECK(part->part == mesh.coordinate("dp_shard"));
      CHECK(part->parts == shard_size);
      CHECK(part->writer == (mesh.coordinate("dp_replicate") == 0));
      CHECK(strategy.optimizer_state_shard(*sgd)->writer == (mesh.coordinate("dp_replicate") == 0));
    }
  }
}

TEST_CASE("HYBRID_SHARD with grad_comm_dtype bf16: the reduce-scatters and the replicas' all-reduces travel in bf16") {
  const int shard_size = world()->size() >= 2 ? 2 : 1;
  const DeviceMesh mesh(*world(), {{"dp_replicate", world()->size() / shard_size}, {"dp_shard", shard_size}});
  auto shard = std::shared_ptr<Communicator>(mesh.comm("dp_shard").dup());
  auto replicate = std::shared_ptr<Communicator>(mesh.comm("dp_replicate").dup());
  HybridShard strategy(Device::cpu(), shard, replicate, DType::bf16, AutoWrapPolicy{}, true);
  auto model = make_odd_mlp(5);
  strategy.prepare_model(*model);
  strategy.before_backward(true);
  backward(loss_of(*model, world()->rank()));
  strategy.after_backward();
  int reduce_scatters = 0, all_reduces = 0;
  for (const LedgerEntry& e : shard->ledger().entries()) {
    if (e.op != "reduce_scatter") continue;
    ++reduce_scatters;
    CHECK(e.dtype == DType::bf16);
  }
  for (const LedgerEntry& e : replicate->ledger().entries()) {
    if (e.op != "all_reduce") continue;
    ++all_reduces;
    CHECK(e.dtype == DType::bf16);
  }
  CHECK(reduce_scatters == 3);
  CHECK(all_reduces == (replicate->size() > 1 ? 3 : 0));
  for (const Tensor& g : strategy.local_grads(model->parameters())) CHECK(g.dtype() == DType::f32);  // back in f32
}

TEST_CASE("HYBRID_SHARD checkpoints: replica 0 writes the shard group's files; they load under DDP and FULL_SHARD") {
  for (const int shard_size : shard_sizes()) {
    INFO("rank ", world()->rank(), ", ", hybrid_name(shard_size));
    const std::string dir = shared_temp_dir() + "/ckpt";
    // Six AdamW steps on batches of each rank's own (so every strategy sees the same global batch);
    // at step 3 the checkpoint is saved, or loaded in place of the state trained so far.
    auto run = [&](std::optional<FSDPPlugin> fsdp, bool save) {
      AcceleratorOptions o = options();
      o.fsdp_plugin = fsdp;
      Accelerator accelerator(o);
      auto model = make_odd_mlp(5 + static_cast<uint64_t>(save ? 0 : 1));  // a resumed run starts elsewhere
      auto optimizer = make_optimizer("adamw", model->parameters());
      auto [net, opt] = accelerator.prepare(model, optimizer);
      std::vector<double> losses;
      for (int step = 0; step < 6; ++step) {
        if (step == 3 && save) accelerator.save_state(dir);
        if (step == 3 && !save) accelerator.load_state(dir);
        opt->zero_grad();
        const Tensor loss = loss_of(*net, step * 10 + accelerator.process_index());
        if (step >= 3) losses.push_back(loss.item());
        accelerator.backward(loss);
        opt->step();
      }
      std::vector<double> weights;
      for (const auto& [name, t] : accelerator.get_state_dict(*net))
        for (float v : t.to_vector<float>()) weights.push_back(v);
      return std::pair{losses, weights};
    };
    const FSDPPlugin hybrid{.sharding_strategy = ShardingStrategy::hybrid_shard, .hybrid_shard_size = shard_size};
    const auto [saved_losses, saved_weights] = run(hybrid, true);
    // One file per rank of a shard group, each written once (by replica 0), as stage 3 on shard_size ranks.
    int files = 0;
    for (const auto& entry : fs::directory_iterator(dir))
      files += entry.path().filename().string().rfind("model.shard-", 0) == 0;
    CHECK(files == shard_size);
    CHECK(fs::exists(dir + "/" + fmt::format("model.shard-{:05d}-of-{:05d}.safetensors", shard_size, shard_size)));
    // Resumed at step 3 under HYBRID_SHARD, DDP and FULL_SHARD, the rest of the run is the saved run's.
    for (const auto& [plugin, what] : std::vector<std::pair<std::optional<FSDPPlugin>, std::string>>{
             {hybrid, "HYBRID_SHARD"}, {std::nullopt, "DDP"}, {FSDPPlugin{}, "FULL_SHARD"}}) {
      INFO("resumed under ", what);
      const auto [losses, weights] = run(plugin, false);
      CHECK(max_rel_diff(losses, saved_losses) <= 1e-6);
      CHECK(rel_diff(weights, saved_weights) <= 1e-6);
    }
  }
}

TEST_CASE("HYBRID_SHARD's default mesh: one shard group per node, when nodes are equal and numbered node by node") {
  const int n = world()->size(), rank = world()->rank();
  if (n % 2 != 0) return;  // two pretend nodes need an even world
  // As a launcher reports 2 nodes of n / 2 ranks each.
  ProcessState two_nodes{.rank = rank, .world_size = n, .local_rank = rank % (n / 2), .local_world_size = n / 2,
                         .node_rank = rank / (n / 2), .num_nodes = 2};
  const std::shared_ptr<DeviceMesh> mesh = make_hybrid_mesh(*world(), two_nodes, 0, "default");
  CHECK(mesh->str() == fmt::format("dp_replicate=2 x dp_shard={}", n / 2));
  CHECK(mesh->coordinate("dp_replicate") == two_nodes.node_rank);
  CHECK(mesh->coordinate("dp_shard") == two_nodes.local_rank);
  // An explicit size wins over the node.
  CHECK(make_hybrid_mesh(*world(), two_nodes, 1, "code")->str() == fmt::format("dp_replicate={} x dp_shard=1", n));
  // Ranks of one node that are not consecutive (rank 0 reports node 1): every rank refuses, none hangs.
  ProcessState shuffled = two_nodes;
  if (rank == 0) shuffled.node_rank = 1;
  const std::string message = error_of([&] { (void)make_hybrid_mesh(*world(), shuffled, 0, "default"); });
  CHECK(message.rfind(fmt::format("Accelerator: sharding_strategy HYBRID_SHARD has no mesh: hybrid_shard_size is not "
                                  "given (default), so a shard group is one node, but the {} ranks are not 2 nodes of "
                                  "equal size numbered node by node (rank {} is local rank {} of {} on node {}); give "
                                  "hybrid_shard_size dividing {}",
                                  n, rank, shuffled.local_rank, n / 2, shuffled.node_rank, n),
                      0) == 0);
}

// Needs ranks on more than one node, so the one-node runs leave it out (meson.build);
// tests/multinode/two_hosts_hybrid_shard.sh runs it on two hosts.
TEST_CASE("multinode: HYBRID_SHARD without a hybrid_shard_size shards within each node the launcher reports, "
          "replicates across the nodes, and equals DDP") {
  const ProcessState process = ProcessState::from_environment();
  INFO("rank ", process.rank, ": local rank ", process.local_rank, " of ", process.local_world_size, " on node ",
       process.node_rank, " of ", process.num_nodes, " (", process.launcher, ")");
  REQUIRE_MESSAGE(process.num_nodes > 1, "this case needs ranks on several nodes: run it with "
                                         "tests/multinode/two_hosts_hybrid_shard.sh");
  const std::shared_ptr<DeviceMesh> mesh = make_hybrid_mesh(*world(), process, 0, "default");
  CHECK(mesh->str() == fmt::format("dp_replicate={} x dp_shard={}", process.num_nodes, process.local_world_size));
  // A shard group is one node's ranks; a replica group holds the same local rank of every node.
  auto spread = [](Communicator& comm, int value) {
    Tensor low = scalar_tensor(value, DType::f64), high = scalar_tensor(value, DType::f64);
    Tensor sum = scalar_tensor(value, DType::f64);
    comm.all_reduce(low, ReduceOp::min);
    comm.all_reduce(high, ReduceOp::max);
    comm.all_reduce(sum);
    return std::tuple{low.item(), high.item(), sum.item()};
  };
  CHECK(spread(mesh->comm("dp_shard"), process.node_rank) ==
        std::tuple{double(process.node_rank), double(process.node_rank), double(process.node_rank * process.local_world_size)});
  CHECK(spread(mesh->comm("dp_replicate"), process.local_rank) ==
        std::tuple{double(process.local_rank), double(process.local_rank), double(process.local_rank * process.num_nodes)});
  const int nodes = process.num_nodes;
  CHECK(spread(mesh->comm("dp_replicate"), process.node_rank) ==
        std::tuple{0.0, double(nodes - 1), double(nodes * (nodes - 1) / 2)});
  for (const int k : {1, 3}) {
    INFO("accumulation ", k);
    check_equal_to_ddp({.zero_stage = 3, .fsdp = true, .accumulation_steps = k, .hybrid_by_node = true}, 1e-6,
                       hybrid_name(process.local_world_size));
  }
}

TEST_CASE("bad HYBRID_SHARD configurations name both settings") {
  const int n = world()->size();
  auto hybrid_options = [](int shard_size) {
    AcceleratorOptions o = options();
    o.fsdp_plugin = FSDPPlugin{.sharding_strategy = ShardingStrategy::hybrid_shard, .hybrid_shard_size = shard_size};
    return o;
  };
  INFO("rank ", world()->rank(), " of ", n);
  CHECK(error_of([&] { Accelerator a(hybrid_options(n + 1)); }) ==
        fmt::format("Accelerator: sharding_strategy HYBRID_SHARD with hybrid_shard_size {} (code): it does not divide "
                    "the world size {}; expected ranks per shard group such that world size = replicas x "
                    "hybrid_shard_size",
                    n + 1, n));
  // All ranks of this test run on one node: a shard group per node leaves nothing to replicate.
  CHECK(error_of([&] { Accelerator a(hybrid_options(0)); }) ==
        fmt::format("Accelerator: sharding_strategy HYBRID_SHARD has no mesh: hybrid_shard_size is not given "
                    "(default), so a shard group is one node, but all {} ranks run on one node and there is nothing "
                    "to replicate across; give hybrid_shard_size (FSDPPlugin, ACCEL_FSDP_HYBRID_SHARD_SIZE, the "
                    "config file's fsdp_hybrid_shard_size or accel launch --fsdp_hybrid_shard_size) dividing {}, or "
                    "use FULL_SHARD",
                    n, n));
  // Over a tensor-parallel model the shard groups are made of dp ranks (world size over tp_size).
  if (n % 2 != 0) return;
  AcceleratorOptions tp = hybrid_options(n);
  tp.parallelism_config = ParallelismConfig{.tp_size = 2};
  CHECK(error_of([&] { Accelerator a(tp); }) ==
        fmt::format("Accelerator: sharding_strategy HYBRID_SHARD with hybrid_shard_size {} (code): it does not "
                    "divide the {} data-parallel ranks (world size {} over tp_size 2); expected dp ranks per shard "
                    "group such that dp = replicas x hybrid_shard_size",
                    n, n / 2, n));
  tp.fsdp_plugin->hybrid_shard_size = 0;
  CHECK(error_of([&] { Accelerator a(tp); }) ==
        fmt::format("Accelerator: sharding_strategy HYBRID_SHARD has no mesh: hybrid_shard_size is not given "
                    "(default), so a shard group is one node, but all {} ranks run on one node and there is nothing "
                    "to replicate across; give hybrid_shard_size (FSDPPlugin, ACCEL_FSDP_HYBRID_SHARD_SIZE, the "
                    "config file's fsdp_hybrid_shard_size or accel launch --fsdp_hybrid_shard_size) dividing {}, or "
                    "use FULL_SHARD",
                    n, n / 2));
}

TEST_CASE("HYBRID_SHARD's default mesh over a TP model: a node's dp ranks form a shard group, whole tp groups only") {
  const int n = world()->size(), rank = world()->rank();
  if (n != 4) return;  // two pretend nodes of one tp group each
  ProcessState two_nodes{.rank = rank, .world_size = n, .local_rank = rank % 2, .local_world_size = 2,
                         .node_rank = rank / 2, .num_nodes = 2};
  CHECK(node_shard_size(*world(), two_nodes, "default", 1) == 2);
  CHECK(node_shard_size(*world(), two_nodes, "default", 2) == 1);
  // tp 4 spans both nodes: no node holds a whole tp group.
  CHECK(error_of([&] { (void)node_shard_size(*world(), two_nodes, "default", 4); }) ==
        "Accelerator: sharding_strategy HYBRID_SHARD has no mesh: hybrid_shard_size is not given (default), so a "
        "shard group is the data-parallel ranks of one node, but a node's 2 ranks do not hold whole "
        "tensor-parallel groups of tp_size 4; give hybrid_shard_size dividing 1");
}

}  // namespace test
