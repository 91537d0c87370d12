// The collectives each stage runs, counted at the communicator: nothing on the early micro-steps of
// an accumulation window, one reduce-scatter per unit on the backward that syncs, and at the step one
// all-reduce of a flag per parameter (which have a grad on some rank), then one all-gather per unit
// in stages 1 and 2.
#include <filesystem>
#include <map>

#include "counting_communicator.h"
#include "tensor/nograd/copy.h"
#include "zero_support.h"

namespace test {

namespace {

int total(const CountingCommunicator& c) {
  int n = 0;
  for (const char* kind : {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "gather", "barrier", "send", "recv"})
    n += c.count(kind);
  return n;
}

Tensor loss_of(nn::Module& model, int64_t seed) {
  Generator gen(static_cast<uint64_t>(seed));
  return nn::mse_loss(model(randn({4, 7}, gen)), randn({4, 3}, gen));
}

}  // namespace

TEST_CASE("stages 1 and 2: no communication before the syncing backward, then one reduce-scatter per unit") {
  for (const int stage : {1, 2}) {
    INFO("rank ", world()->rank(), ", stage ", stage);
    auto counting = std::make_shared<CountingCommunicator>(world()->dup());
    ZeroStage12 strategy(stage, Device::cpu(), counting, DType::f32, /*bucket_cap_bytes=*/256);
    auto model = make_odd_mlp(5);
    auto adamw = make_optimizer("adamw", model->parameters());
    strategy.prepare_model(*model);
    strategy.prepare_optimizer(*adamw);
    const int units = static_cast<int>(strategy.units_of(*model).size());
    CHECK(units == 4);  // 18 + 5, 65, 13, 91 elements: buckets of at most 64 floats, or one parameter
    CHECK(counting->count("broadcast") == units);  // rank 0's initial values, one per unit
    counting->reset();
    for (int micro = 0; micro < 2; ++micro) {  // two early micro-steps: local only
      strategy.before_backward(false);
      backward(loss_of(*model, world()->rank() * 10 + micro));
      strategy.after_backward();
    }
    CHECK(total(*counting) == 0);
    strategy.before_backward(true);
    backward(loss_of(*model, world()->rank() * 10 + 2));
    strategy.after_backward();
    CHECK(counting->count("reduce_scatter") == units);
    CHECK(total(*counting) == units);
    // Each rank holds the averaged grad of its slices only; stage 1's is its own part of its full
    // grads (reduce-scattered in place), whose other parts are zero.
    const std::vector<Tensor> grads = strategy.local_grads(model->parameters());
    REQUIRE(grads.size() == static_cast<size_t>(units));
    for (size_t u = 0; u < grads.size(); ++u) {
      const FlatUnit& unit = *strategy.units_of(*model)[u];
      CHECK(grads[u].numel() == unit.shard_numel());
      if (stage != 1) continue;
      CHECK(grads[u].storage() == unit.full_grad().storage());
      CHECK(grads[u].data_ptr() == static_cast<const float*>(unit.full_grad().data_ptr()) + unit.shard_offset());
      const std::vector<float> full = unit.full_grad().to_vector<float>();
      for (int64_t i = 0; i < unit.padded_numel(); ++i)
        if (i < unit.shard_offset() || i >= unit.shard_offset() + unit.shard_numel()) CHECK(full[static_cast<size_t>(i)] == 0.0f);
    }
    // Stage 2 keeps no full grads after sending them; stage 1 keeps them until zero_grad.
    for (const Tensor& p : model->parameters()) CHECK(p.grad().defined() == (stage == 1));
    counting->reset();
    strategy.optimizer_step(*adamw);
    CHECK(counting->count("all_gather") == units);
    CHECK(counting->count("all_reduce") == 1);  // which parameters have a grad on some rank: a flag each
    CHECK(total(*counting) == units + 1);
  }
}

TEST_CASE("stage 1: two syncing backwards without zero_grad leave the average of both, as DDP's do") {
  ZeroStage12 strategy(1, Device::cpu(), world()->dup(), DType::f32, /*bucket_cap_bytes=*/256);
  auto model = make_odd_mlp(5);
  auto reference = make_odd_mlp(5);  // the same weights, trained plainly
  auto adamw = make_optimizer("adamw", model->parameters());
  strategy.prepare_model(*model);
  strategy.prepare_optimizer(*adamw);
  for (int k = 0; k < 2; ++k) {
    strategy.before_backward(true);
    backward(loss_of(*model, world()->rank() * 10 + k));
    strategy.after_backward();
    backward(loss_of(*reference, world()->rank() * 10 + k));
  }
  std::map<std::string, Tensor> averaged;  // each reference grad summed over both losses, then averaged
  for (const auto& [name, p] : reference->named_parameters()) {
    Tensor g = nograd::clone(p.grad());
    world()->all_reduce(g, ReduceOp::avg);
    averaged[name] = g;
  }
  const std::vector<Tensor> grads = strategy.local_grads(model->parameters());
  const std::vector<const FlatUnit*> units = strategy.units_of(*model);
  REQUIRE(grads.size() == units.size());
  for (size_t u = 0; u < units.size(); ++u) {
    Tensor flat = zeros({units[u]->padded_numel()});
    for (size_t j = 0; j < units[u]->params().size(); ++j)
      nograd::copy_(units[u]->param_view(flat, j), averaged.at(units[u]->param_names()[j]));
    const std::vector<float> want = units[u]->shard_of(flat).to_vector<float>(), got = grads[u].to_vector<float>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
  }
}

TEST_CASE("a unit's padded layout: every rank owns one contiguous slice, the padding stays zero") {
  const int n = world()->size();
  Generator gen(1);
  nn::Linear lin(3, 3, true, gen);  // 9 + 3 = 12 elements
  nn::Linear odd(2, 3, true, gen);  // 6 + 3 = 9 elements
  FlatUnit unit("odd", odd.named_parameters(), world()->rank(), n);
  CHECK(unit.numel() == 9);
  CHECK(unit.padded_numel() == (9 + n - 1) / n * n);
  CHECK(unit.shard_numel() * n == unit.padded_numel());
  CHECK(unit.shard_offset() == unit.shard_numel() * world()->rank());
  // The module's parameters are views of the flat buffer: writing one shows in the other.
  CHECK(odd.weight().data_ptr() == unit.full().data_ptr());
  CHECK(static_cast<float*>(odd.bias().data_ptr()) == unit.full().data<float>() + 6);
  const std::vector<float> flat = unit.full().to_vector<float>();
  for (int64_t i = 9; i < unit.padded_numel(); ++i) CHECK(flat[static_cast<size_t>(i)] == 0.0f);
}

}  // namespace test

namespace test {

TEST_CASE("stage 3: one all-gather per unit in forward, one in backward, one reduce-scatter per unit") {
  for (const bool accumulate : {false, true}) {
    INFO("rank ", world()->rank(), accumulate ? ", an early micro-step" : ", a syncing backward");
    auto counting = std::make_shared<CountingCommunicator>(world()->dup());
    ZeroStage3 strategy(Device::cpu(), counting, DType::f32, AutoWrapPolicy{}, /*reshard_after_forward=*/true);
    auto model = make_odd_mlp(5);
    auto sgd = make_optimizer("sgd", model->parameters());
    strategy.prepare_model(*model);
    strategy.prepare_optimizer(*sgd);
    CHECK(strategy.unit_names(*model) == std::vector<std::string>{"0", "2", "4"});  // each Linear; no root unit
    // Between uses every rank holds its slices only: the parameters' data is given back.
    CHECK(model->parameters()[0].storage()->is_released());
    counting->reset();
    strategy.clear_events();
    const Tensor loss = loss_of(*model, world()->rank());
    CHECK(counting->count("all_gather") == 3);
    CHECK(total(*counting) == 3);
    // Unit 0 gathers itself and prefetches unit 1; unit 1's forward prefetches unit 2.
    using K = ZeroEvent::Kind;
    CHECK(strategy.events() == std::vector<ZeroEvent>{{K::gather, 0}, {K::gather, 1}, {K::free, 0}, {K::gather, 2},
                                                      {K::free, 1}, {K::free, 2}});
    for (const Tensor& p : model->parameters()) CHECK(p.storage()->is_released());
    counting->reset();
    strategy.clear_events();
    strategy.before_backward(!accumulate);
    backward(loss);
    strategy.after_backward();
    CHECK(counting->count("all_gather") == 3);
    CHECK(counting->count("reduce_scatter") == 3);
    CHECK(total(*counting) == 6);
    // Backward runs in reverse: each unit is gathered (the one before it prefetched), its grads
    // reduce-scattered as soon as its backward is done, and freed.
    CHECK(strategy.events() == std::vector<ZeroEvent>{{K::gather, 2}, {K::gather, 1}, {K::reduce_scatter, 2},
                                                      {K::free, 2}, {K::gather, 0}, {K::reduce_scatter, 1},
                                                      {K::free, 1}, {K::reduce_scatter, 0}, {K::free, 0}});
    const std::vector<Tensor> grads = strategy.local_grads(model->parameters());
    REQUIRE(grads.size() == 3);
    for (const Tensor& p : model->parameters()) CHECK_FALSE(p.grad().defined());
    // The step agrees which parameters have a grad (one all-reduce of a flag each), updates the
    // slices and gathers nothing: the next forward does.
    counting->reset();
    strategy.optimizer_step(*sgd);
    CHECK(counting->count("all_reduce") == 1);
    CHECK(total(*counting) == 1);
    // What this rank holds now is its slices only: parameters, grads and SGD's momentum, 4 bytes each.
    int64_t slice_bytes = 0;
    for (const FlatUnit* unit : strategy.units_of(*model)) slice_bytes += unit->shard_numel() * 4;
    const ZeroStrategy::HeldBytes held = strategy.held_bytes();
    CHECK(held.parameters == slice_bytes);
    CHECK(held.gradients == slice_bytes);
    CHECK(held.optimizer_state == slice_bytes);
  }
}

TEST_CASE("stage 3: get_state_dict gathers the full weights; a parameter read outside its unit says why it cannot; "
          "loading full weights runs no collective") {
  auto model = make_odd_mlp(9);
  const nn::StateDict before = model->state_dict();
  std::vector<std::vector<float>> expected;
  for (const auto& [name, t] : before) expected.push_back(t.to_vector<float>());
  auto counting = std::make_shared<CountingCommunicator>(world()->dup());
  ZeroStage3 strategy(Device::cpu(), counting, DType::f32, AutoWrapPolicy{.min_num_params = 60}, true);
  strategy.prepare_model(*model);  // every rank built seed 9, so rank 0's broadcast changes nothing
  CHECK(strategy.unit_names(*model) == std::vector<std::string>{"0", "2", "(root)"});
  const nn::StateDict full = strategy.model_state_dict(*model);
  REQUIRE(full.size() == before.size());
  for (size_t i = 0; i < full.size(); ++i) {
    CHECK(full[i].first == before[i].first);
    CHECK(full[i].second.to_vector<float>() == expected[i]);
  }
  CHECK_THROWS_WITH_AS(model->parameters()[0].to_vector<float>(),
                       doctest::Contains("was released (a sharded parameter read outside its unit's forward"), Error);
  // Loading full weights keeps each rank's slices of them, copied out of them: no collective.
  nn::StateDict doubled;
  for (const auto& [name, t] : full) doubled.emplace_back(name, t * 2.0);
  counting->reset();
  strategy.load_model_state_dict(*model, doubled, true);
  CHECK(total(*counting) == 0);
  const nn::StateDict back = strategy.model_state_dict(*model);
  for (size_t i = 0; i < back.size(); ++i) CHECK(back[i].second.to_vector<float>() == (full[i].second * 2.0).to_vector<float>());
}

TEST_CASE("auto_wrap: a module type that matches nothing is an error naming the setting and the types there are") {
  auto model = make_odd_mlp(1);
  CHECK_THROWS_WITH_AS(auto_wrap_units(*model, {.module_types = {"GPTBlock"}}),
                       "auto_wrap: FSDPPlugin auto_wrap.module_types names 'GPTBlock', which matches no module of this "
                       "Sequential (its module types: Linear, Sequential, Tanh)",
                       Error);
}

}  // namespace test

namespace test {

TEST_CASE("the seed's DeepSpeedPlugin snippet: stage 2, accumulation 2, fp16; save_model loads into a plain model") {
  // deepspeed_plugin = DeepSpeedPlugin(zero_stage=2, gradient_accumulation_steps=2)
  // accelerator = Accelerator(mixed_precision='fp16', deepspeed_plugin=deepspeed_plugin)
  AcceleratorOptions o = options();
  o.deepspeed_plugin = DeepSpeedPlugin{.zero_stage = 2, .gradient_accumulation_steps = 2};
  o.mixed_precision = "fp16";
  Accelerator accelerator(o);
  CHECK(accelerator.strategy().name() == "zero_2");
  CHECK(accelerator.gradient_accumulation_steps() == 2);
  auto model = make_odd_mlp(3);
  auto optimizer = make_optimizer("adamw", model->parameters());
  DataLoader loader(odd_data(64), {.batch_size = 4, .shuffle = true, .seed = 1});
  auto [net, opt, data] = accelerator.prepare(model, optimizer, loader);
  for (const Batch& batch : data) {
    auto scope = accelerator.accumulate();
    opt->zero_grad();
    Tensor loss;
    {
      auto autocast = accelerator.autocast();
      loss = nn::mse_loss((*net)(batch[0]), batch[1]);
    }
    accelerator.backward(loss);
    opt->step();
  }
  const std::string dir = (std::filesystem::temp_directory_path() / "accel_zero_seed_snippet").string();
  accelerator.wait_for_everyone();
  auto unwrapped = accelerator.unwrap_model(net);
  accelerator.save_model(*unwrapped, dir);  // get_state_dict's full weights, written by rank 0
  const nn::StateDict full = accelerator.get_state_dict(*net);
  // An unsharded model of another init loads the file and holds exactly the trained weights.
  auto plain = make_odd_mlp(77);
  CHECK(plain->load_state_dict(load_safetensors(dir + "/model.safetensors").tensors).missing.empty());
  const nn::StateDict loaded = plain->state_dict();
  REQUIRE(loaded.size() == full.size());
  for (size_t i = 0; i < full.size(); ++i) CHECK(loaded[i].second.to_vector<float>() == full[i].second.to_vector<float>());
  accelerator.wait_for_everyone();
  if (accelerator.is_main_process()) std::filesystem::remove_all(dir);
}

}  // namespace test

namespace test {

TEST_CASE("under ZeRO an optimizer over a model that was never prepared is refused, naming the stage") {
  for (const int stage : {1, 3}) {
    AcceleratorOptions o = options();
    o.deepspeed_plugin = DeepSpeedPlugin{.zero_stage = stage, .gradient_accumulation_steps = std::nullopt};
    Accelerator accelerator(o);
    auto model = make_odd_mlp(1);
    auto optimizer = make_optimizer("sgd", model->parameters());
    const std::string expected = fmt::format("is in no model prepared under zero_{}; prepare its model first", stage);
    const std::string message = error_of([&] { accelerator.prepare(optimizer); });
    INFO(message);
    CHECK(message.find(expected) != std::string::npos);
  }
}

TEST_CASE("grad_comm_dtype bf16: ZeRO's reduce-scatters travel in bf16 as DDP's all-reduces do; f32 widens them") {
  for (const int stage : {2, 3}) {
    INFO("rank ", world()->rank(), ", stage ", stage);
    auto train = [&](int s, const char* comm_dtype = "bf16") {
      AcceleratorOptions o = options();
      o.mixed_precision = "bf16";
      if (comm_dtype) o.grad_comm_dtype = comm_dtype;
      if (s > 0) o.deepspeed_plugin = DeepSpeedPlugin{.zero_stage = s, .gradient_accumulation_steps = std::nullopt};
      Accelerator accelerator(o);
      auto model = make_odd_mlp(4);
      auto optimizer = make_optimizer("sgd", model->parameters());
      auto [net, opt] = accelerator.prepare(model, optimizer);
      for (int step = 0; step < 10; ++step) {
        Generator gen(static_cast<uint64_t>(step * 10 + accelerator.process_index()));
        opt->zero_grad();
        Tensor loss;
        {
          auto autocast = accelerator.autocast();
          loss = nn::mse_loss((*net)(randn({4, 7}, gen)), randn({4, 3}, gen));
        }
        accelerator.backward(loss);
        opt->step();
      }
      std::vector<double> w;
      for (const auto& [name, t] : accelerator.get_state_dict(*net))
        for (float v : t.to_vector<float>()) w.push_back(v);
      return w;
    };
    const std::vector<double> ddp = train(0), zero = train(stage);
    const double diff = rel_diff(zero, ddp);
    INFO("weights differ by ", diff);
    // bf16 sums (8 bits of mantissa), possibly in another order: within bf16's rounding.
    CHECK(diff <= 1e-2);
    CHECK(differs_across_ranks(zero) == "");
    // Under bf16 ZeRO's grads are bf16 (its f32 masters are sharded, docs/zero.md). grad_comm_dtype f32
    // widens them for the reduce-scatter, and the run is then DDP's with its f32 all-reduce: each
    // parameter is read once, so DDP's f32 grads are the same bf16 grads upcast, and on 2 ranks the f32
    // sum has one order.
    const std::vector<double> zero_f32 = train(stage, "f32"), ddp_f32 = train(0, "f32");
    CHECK(max_abs_diff(zero_f32, zero) > 0);
    CHECK(max_abs_diff(ddp_f32, ddp) > 0);
    CHECK(rel_diff(zero_f32, ddp_f32) <= (world()->size() == 2 ? 0 : 1e-5));
    // The default under ZeRO with bf16 is bf16 (DeepSpeed's and FSDP's): no setting is the bf16 run.
    CHECK(max_abs_diff(train(stage, nullptr), zero) == 0);
  }
}

}  // namespace test

namespace test {

TEST_CASE("fp16: grads whose sum over the ranks overflows f16 but whose average fits are averaged, not skipped (DDP and every stage)") {
  // Every rank's scaled grad is 40000 and f16's largest value 65504: two ranks' sum is inf, where the
  // average is 40000. Divided by N before the sum (grad_average.h) the wire holds 40000 / N per rank,
  // the step goes ahead, and SGD with lr 1 moves each weight by the unscaled grad, c.
  const double c = 40000.0 / 65536.0;  // the loss's slope: scaled by the scaler's 2^16, exactly 40000
  for (const int stage : {0, 1, 2, 3}) {
    INFO("rank ", world()->rank(), " of ", world()->size(), ", stage ", stage);
    AcceleratorOptions o = options();
    o.mixed_precision = "fp16";
    o.grad_comm_dtype = "compute";  // DDP's all-reduce in f16 too (ZeRO's default under fp16)
    if (stage > 0) o.deepspeed_plugin = DeepSpeedPlugin{.zero_stage = stage, .gradient_accumulation_steps = std::nullopt};
    Accelerator accelerator(o);
    Generator gen(3);
    auto model = std::make_shared<nn::Sequential>();
    model->push_back(std::make_shared<nn::Linear>(1, 3, false, gen));
    const std::vector<double> before = weights_of(*model);
    auto sgd = std::make_shared<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 1.0});
    auto [net, opt] = accelerator.prepare(model, sgd);
    opt->zero_grad();
    Tensor loss;
    {
      auto autocast = accelerator.autocast();
      loss = mul(sum(to((*net)(ones({1, 1})), DType::f32)), c);
    }
    accelerator.backward(loss);
    opt->step();
    CHECK_FALSE(accelerator.optimizer_step_was_skipped());
    std::vector<double> after;
    for (const auto& [name, t] : accelerator.get_state_dict(*net))
      for (float v : to(t, DType::f32).to_vector<float>()) after.push_back(v);
    REQUIRE(after.size() == before.size());
    for (size_t i = 0; i < after.size(); ++i) CHECK(after[i] == doctest::Approx(before[i] - c).epsilon(1e-6));
  }
}

}  // namespace test
