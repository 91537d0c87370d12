// Under bf16 and fp16 ZeRO keeps the f32 masters only as each rank's slices: what each rank holds
// (16-bit parameters and grads, 1/N of the f32 masters and of AdamW's moments), that the grads and the
// updated parameters travel in 16-bit, that the precision unscales f32 slices, and that get_state_dict
// gives the f32 masters gathered.
#include "zero_support.h"

namespace test {

namespace {

struct Layout {
  int64_t numel = 0, padded = 0, shard = 0;  // summed over the units
};

Layout layout_of(const ZeroStrategy& strategy, const nn::Module& model) {
  Layout l;
  for (const FlatUnit* u : strategy.units_of(model)) {
    l.numel += u->numel();
    l.padded += u->padded_numel();
    l.shard += u->shard_numel();
  }
  return l;
}

// One AdamW step of odd_mlp under mixed_precision and the stage, through the Accelerator.
struct OneStep {
  std::unique_ptr<Accelerator> accelerator;
  std::shared_ptr<nn::Sequential> model;
  std::shared_ptr<optim::Optimizer> optimizer;
};

OneStep one_step(int stage, const std::string& precision) {
  AcceleratorOptions o = options();
  o.mixed_precision = precision;
  o.bucket_cap_mb = 256.0 / (1 << 20);
  if (stage > 0) o.deepspeed_plugin = DeepSpeedPlugin{.zero_stage = stage, .gradient_accumulation_steps = std::nullopt};
  OneStep s{std::make_unique<Accelerator>(o), make_odd_mlp(7), nullptr};
  s.optimizer = make_optimizer("adamw", s.model->parameters());
  auto [net, opt] = s.accelerator->prepare(s.model, s.optimizer);
  Generator gen(static_cast<uint64_t>(11 + s.accelerator->process_index()));
  opt->zero_grad();
  Tensor loss;
  {
    auto autocast = s.accelerator->autocast();
    loss = nn::mse_loss((*net)(randn({4, 7}, gen)), randn({4, 3}, gen));
  }
  s.accelerator->backward(loss);
  opt->step();
  return s;
}

}  // namespace

TEST_CASE("bf16 and fp16: a rank holds 1/N of the f32 masters and of AdamW's state, and 16-bit parameters and grads") {
  for (const std::string precision : {"bf16", "fp16"}) {
    const DType half = precision == "bf16" ? DType::bf16 : DType::f16;
    // DDP's reference: its parameters are the f32 masters (4Ψ), with AdamW's two f32 moments (8Ψ).
    OneStep ddp = one_step(0, precision);
    int64_t psi = 0, ddp_masters = 0, ddp_state = 0;
    for (const Tensor& p : ddp.model->parameters()) {
      psi += p.numel();
      ddp_masters += static_cast<int64_t>(p.nbytes());
      CHECK(p.dtype() == DType::f32);
    }
    for (const auto& [key, t] : ddp.optimizer->state_dict())
      if (key.rfind("state.", 0) == 0 && t.dim() > 0) ddp_state += static_cast<int64_t>(t.nbytes());
    REQUIRE(ddp_masters == 4 * psi);
    REQUIRE(ddp_state == 8 * psi);
    for (const int stage : {1, 2, 3}) {
      INFO("rank ", world()->rank(), " of ", world()->size(), ", ", precision, ", stage ", stage);
      OneStep s = one_step(stage, precision);
      const auto& zero = dynamic_cast<const ZeroStrategy&>(s.accelerator->strategy());
      const Layout l = layout_of(zero, *s.model);
      const int n = world()->size();
      REQUIRE(l.numel == psi);
      CHECK(l.padded - psi < n * static_cast<int64_t>(zero.units_of(*s.model).size()));  // padding only
      CHECK(l.shard * n == l.padded);
      const ZeroStrategy::HeldBytes held = zero.held_bytes();
      // The f32 masters and AdamW's moments: this rank's slices, 1/N of DDP's (up to the padding).
      int64_t moments = 0, counts = 0;
      for (const auto& [key, t] : zero.updating_optimizer(*s.optimizer).state_dict())
        if (key.rfind("state.", 0) == 0) (t.dim() > 0 ? moments : counts) += static_cast<int64_t>(t.nbytes());
      CHECK(held.master_weights == 4 * l.shard);
      CHECK(moments == 8 * l.shard);
      CHECK(held.optimizer_state == moments + counts);  // and Adam's step count per slice segment
      CHECK(held.master_weights * n == ddp_masters + 4 * (l.padded - psi));
      CHECK(moments * n == ddp_state + 8 * (l.padded - psi));
      // The model's parameters are 16-bit: whole under stages 1 and 2 (2Ψ), this rank's 16-bit slice
      // under stage 3 (its gathered buffers are freed after the step). The f32 masters' grads are gone
      // after the step; the 16-bit grads stay until zero_grad (stage 1 whole, 2 and 3 the shard).
      for (const Tensor& p : s.model->parameters()) CHECK(p.dtype() == half);
      CHECK(held.parameters == 2 * (stage == 3 ? l.shard : l.padded));
      CHECK(held.gradients == 2 * (stage == 1 ? l.padded : l.shard));
      // What the optimizer updates: f32 slices, shard_numel elements per unit.
      int64_t updated = 0;
      for (const Tensor& p : zero.updating_optimizer(*s.optimizer).params()) {
        CHECK(p.dtype() == DType::f32);
        updated += p.numel();
      }
      CHECK(updated == l.shard);
      // get_state_dict: the f32 masters, gathered; every rank has the same.
      std::vector<double> weights;
      for (const auto& [name, t] : s.accelerator->get_state_dict(*s.model)) {
        CHECK(t.dtype() == DType::f32);
        for (float v : t.to_vector<float>()) weights.push_back(v);
      }
      CHECK(static_cast<int64_t>(weights.size()) == psi);
      CHECK(differs_across_ranks(weights) == "");
      // ... and they round to the 16-bit parameters forward reads (stages 1 and 2 keep them whole).
      if (stage != 3) {
        const nn::StateDict full = s.accelerator->get_state_dict(*s.model);
        const nn::StateDict live = s.model->state_dict();
        auto values = [](const Tensor& t) {
          std::vector<double> out;
          for (float v : to(t, DType::f32).to_vector<float>()) out.push_back(v);
          return out;
        };
        for (size_t i = 0; i < full.size(); ++i)
          CHECK(max_abs_diff(values(to(full[i].second, half)), values(live[i].second)) == 0);
      }
    }
  }
}

TEST_CASE("bf16: the grads are reduce-scattered in the wire's dtype (bf16, or f32 widened) and the updated slices all-gathered in 16-bit; the step reads f32 slices") {
  for (const DType wire : {DType::bf16, DType::f32}) {
    for (const int stage : {1, 2, 3}) {
      INFO("rank ", world()->rank(), ", stage ", stage, ", wire ", dtype_name(wire));
      auto comm = std::shared_ptr<Communicator>(world()->dup());
      std::unique_ptr<ZeroStrategy> strategy;
      if (stage == 3) strategy = std::make_unique<ZeroStage3>(Device::cpu(), comm, wire, AutoWrapPolicy{}, true);
      else strategy = std::make_unique<ZeroStage12>(stage, Device::cpu(), comm, wire, /*bucket_cap_bytes=*/256);
      strategy->shard_masters_in(DType::bf16);
      auto model = make_odd_mlp(5);
      auto adamw = make_optimizer("adamw", model->parameters());
      strategy->prepare_model(*model);
      strategy->prepare_optimizer(*adamw);
      CHECK_THROWS_WITH_AS(strategy->shard_masters_in(DType::f16), doctest::Contains("after a model was prepared"), Error);
      const size_t units = strategy->units_of(*model).size();
      const uint64_t before = comm->ledger().last_seq();  // what prepare ran (the broadcasts) is not counted
      const PrecisionPolicy policy = PrecisionPolicy::from_settings("bf16");
      strategy->before_backward(true);
      {
        AutocastGuard autocast(policy);
        Generator gen(static_cast<uint64_t>(world()->rank()));
        Tensor loss = nn::mse_loss(to((*model)(randn({4, 7}, gen)), DType::f32), randn({4, 3}, gen));
        backward(loss);
      }
      strategy->after_backward();
      const std::vector<Tensor> grads = strategy->local_grads(model->parameters());
      REQUIRE(grads.size() == units);
      for (size_t u = 0; u < units; ++u) {
        CHECK(grads[u].dtype() == DType::f32);  // the masters' grads: the shard grads upcast
        CHECK(grads[u].numel() == strategy->units_of(*model)[u]->shard_numel());
      }
      strategy->optimizer_step(*adamw);
      size_t reduce_scatters = 0, all_gathers = 0;
      for (const LedgerEntry& e : comm->ledger().entries()) {
        if (e.seq <= before) continue;
        if (e.op == "reduce_scatter") {
          ++reduce_scatters;
          CHECK(e.dtype == wire);
        }
        if (e.op == "all_gather") {
          ++all_gathers;
          CHECK(e.dtype == DType::bf16);
        }
      }
      CHECK(reduce_scatters == units);
      // Stages 1 and 2 gather the updated slices after the step; stage 3 gathers in forward and backward.
      CHECK(all_gathers == (stage == 3 ? 2 * units : units));
      CHECK(strategy->local_grads(model->parameters()).empty());  // the f32 grads are dropped after the step
    }
  }
}

}  // namespace test
