// The odd-sized model's data (the model is odd_mlp.h), the wide model, the training loop under any strategy,
// and the relative difference.
#include "zero_support.h"

#include <cmath>

#include "tensor/nograd/views.h"

namespace test {

std::shared_ptr<TensorDataset> odd_data(int64_t samples) {
  Generator gen(4321);
  Tensor x = randn({samples, 7}, gen);
  Tensor w = randn({7, 3}, gen);
  return std::make_shared<TensorDataset>(std::vector<Tensor>{x, tanh(matmul(x, w))});
}

std::vector<unsigned char> bytes_of(const nn::StateDict& state) {
  std::vector<unsigned char> out;
  for (const auto& [name, t] : state) {
    const Tensor c = nograd::contiguous(t);
    const auto* p = static_cast<const unsigned char*>(c.data_ptr());
    out.insert(out.end(), p, p + c.nbytes());
  }
  return out;
}

std::shared_ptr<nn::Sequential> make_wide_mlp(uint64_t seed) {
  Generator gen(seed);
  auto mlp = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 8; ++i) mlp->push_back(std::make_shared<nn::Linear>(256, 256, true, gen));
  return mlp;
}

std::shared_ptr<nn::Module> make_zero_model(const ZeroSpec& spec, uint64_t seed) {
  if (spec.gated) return std::make_shared<GatedOddMlp>(seed);
  return make_odd_mlp(seed);
}

namespace {

AcceleratorOptions options_for(const ZeroSpec& spec) {
  AcceleratorOptions o = options(spec.backend);
  o.split_batches = true;
  o.mixed_precision = spec.mixed_precision;
  if (!spec.grad_comm_dtype.empty()) o.grad_comm_dtype = spec.grad_comm_dtype;
  if (spec.loss_scale > 0) o.loss_scaler = LossScalerOptions{.init_scale = spec.loss_scale};
  o.bucket_cap_mb = spec.bucket_cap_mb;
  if (spec.zero_stage > 0 && !spec.fsdp)
    o.deepspeed_plugin = DeepSpeedPlugin{.zero_stage = spec.zero_stage,
                                         .gradient_accumulation_steps = spec.accumulation_steps};
  else
    o.gradient_accumulation_steps = spec.accumulation_steps;
  const ShardingStrategy hybrid = spec.hybrid_zero2 ? ShardingStrategy::hybrid_shard_zero2 : ShardingStrategy::hybrid_shard;
  const ShardingStrategy fsdp_strategy = spec.hybrid_shard_size > 0 || spec.hybrid_by_node ? hybrid
                                         : spec.zero_stage == 3      ? ShardingStrategy::full_shard
                                                                     : ShardingStrategy::shard_grad_op;
  if (spec.fsdp && spec.zero_stage > 0)
    o.fsdp_plugin = FSDPPlugin{.sharding_strategy = fsdp_strategy,
                               .auto_wrap = spec.auto_wrap,
                               .reshard_after_forward = spec.reshard_after_forward,
                               .hybrid_shard_size = spec.hybrid_shard_size};
  return o;
}

}  // namespace

ZeroRun train_zero(const ZeroSpec& spec, uint64_t seed) {
  Accelerator accelerator(options_for(spec));
  std::shared_ptr<nn::Module> model;
  if (spec.deferred_init) {
    DeferredInit deferred;
    model = make_zero_model(spec, seed);
  } else {
    model = make_zero_model(spec, seed + static_cast<uint64_t>(accelerator.process_index()));
  }
  auto* gated = dynamic_cast<GatedOddMlp*>(model.get());
  auto optimizer = make_optimizer(spec.optimizer, model->parameters());
  const int64_t micro_batch = 8;
  DataLoader loader(odd_data(micro_batch * spec.accumulation_steps * spec.steps),
                    {.batch_size = micro_batch, .shuffle = true, .seed = 3});
  auto [net, opt, data] = accelerator.prepare(model, optimizer, loader);
  ZeroRun run;
  run.strategy = accelerator.strategy().name();
  int64_t micro_step = 0;
  for (const Batch& batch : data) {
    const int64_t step = micro_step++ / spec.accumulation_steps;
    if (gated)
      gated->use_branch = step % 2 == 0 || (spec.gated_by_rank && step % 4 == 1 && accelerator.process_index() == 0);
    auto scope = accelerator.accumulate();
    opt->zero_grad();
    Tensor loss;
    {
      auto autocast = accelerator.autocast();
      loss = nn::mse_loss((*net)(batch[0]), batch[1]);
    }
    run.losses.push_back(loss.item());
    accelerator.backward(loss);
    if (spec.clip_norm > 0 && accelerator.sync_gradients())
      run.norms.push_back(accelerator.clip_grad_norm(*net, spec.clip_norm));
    opt->step();
  }
  for (const auto& [name, t] : accelerator.get_state_dict(*net))
    for (float v : to(t, DType::f32).to_vector<float>()) run.weights.push_back(v);
  if (const LossScaler* scaler = accelerator.loss_scaler()) run.skipped_steps = scaler->skipped_steps();
  return run;
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / std::abs(b[i]));
  return worst;
}

double rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double scale = 0;
  for (double v : b) scale = std::max(scale, std::abs(v));
  return max_abs_diff(a, b) / scale;
}

}  // namespace test
