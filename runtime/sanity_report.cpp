// SanityReport: hashes of parameters before and after the first update of each prepared optimizer,
// their grads compared across ranks, and the dtypes and optimizer coverage, as "accel check: " lines.
#include "runtime/sanity_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "kernels/fnv1a.h"
#include "runtime/environment.h"
#include "runtime/precision/precision.h"
#include "runtime/prepared_names.h"
#include "runtime/strategy/strategy.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"
#include "tensor/storage.h"

namespace accel {

namespace {

constexpr const char* kPrefix = "accel check: ";

// FNV-1a over the tensor's bytes in row-major order (a host copy first where it lives on a device).
uint64_t hash_of(const Tensor& t) {
  const Tensor host = t.device().is_cpu() ? nograd::contiguous(t) : nograd::to_device(nograd::contiguous(t), Device::cpu());
  return Fnv1a().bytes(host.data_ptr(), host.nbytes()).word(static_cast<uint64_t>(t.dtype())).value();
}

// "f32" or "f32 and bf16": the dtypes in a set, in DType order.
std::string dtypes_text(const std::set<DType>& dtypes) {
  std::vector<std::string> names;
  for (DType d : dtypes) names.emplace_back(dtype_name(d));
  return names.empty() ? "none" : fmt::format("{}", fmt::join(names, " and "));
}

// "rank 1" or "ranks 1,3".
std::string ranks_text(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ","));
}

bool holds_whole_value(const Tensor& p) { return p.defined() && p.storage() && !p.storage()->is_released(); }

}  // namespace

SanityReport::SanityReport(const TrainingParts& parts, std::ostream& out)
    : parts_(parts), out_(out), print_(parts.env && parts.env->process().is_main_process()) {}

void SanityReport::finding(std::string text) {
  findings_.push_back(text);
  lines_.push_back(std::move(text));
}

void SanityReport::note(std::string text) { lines_.push_back(std::move(text)); }

void SanityReport::print_pending() {
  if (print_)
    for (; printed_ < lines_.size(); ++printed_) out_ << kPrefix << lines_[printed_] << '\n';
  printed_ = lines_.size();
  out_ << std::flush;
}

void SanityReport::report_coverage() {
  std::unordered_set<const TensorImpl*> in_optimizers;
  for (const PreparedOptimizer& prepared : parts_.optimizers)
    if (auto opt = prepared.optimizer.lock())
      for (const Tensor& p : opt->params()) in_optimizers.insert(p.impl());
  // A frozen parameter (requires_grad false) is meant to stay out of the optimizers.
  for (const auto& [name, p] : prepared_named_parameters(parts_.models))
    if (p.requires_grad() && !in_optimizers.count(p.impl()))
      finding(fmt::format("{} is in no prepared optimizer: it requires a gradient but nothing updates it", name));
  const auto names = prepared_parameter_names(parts_.models);
  for (size_t k = 0; k < parts_.optimizers.size(); ++k)
    if (auto opt = parts_.optimizers[k].optimizer.lock())
      for (size_t i = 0; i < opt->params().size(); ++i)
        if (!names.count(opt->params()[i].impl()))
          finding(fmt::format("parameter {} of optimizer {} ({}) is in no prepared model", i, k, opt->params()[i].str()));
}

void SanityReport::report_dtypes() {
  const PrecisionPolicy& policy = parts_.precision->policy();
  std::set<DType> param_dtypes, grad_dtypes;
  std::vector<Tensor> params;
  for (const auto& [name, p] : prepared_named_parameters(parts_.models)) {
    params.push_back(p);
    param_dtypes.insert(p.dtype());
    if (p.dtype() != policy.param)
      finding(fmt::format("{} is {} but the precision policy keeps parameters in {}", name, dtype_name(p.dtype()),
                          dtype_name(policy.param)));
  }
  // The grads the update reads: the whole ones where replicated, this rank's shard grads where sharded.
  for (const Tensor& g : parts_.strategy->local_grads(params)) grad_dtypes.insert(g.dtype());
  note(fmt::format("dtypes: parameters {}, gradients {} (all-reduced in {}), matmuls {} (the precision policy's "
                   "compute dtype; mixed precision {})",
                   dtypes_text(param_dtypes), dtypes_text(grad_dtypes), dtype_name(policy.grad_comm),
                   dtype_name(policy.compute), parts_.precision->name()));
}

std::vector<SanityReport::Watched> SanityReport::watched_for(const optim::Optimizer& optimizer, bool first) {
  const auto names = prepared_parameter_names(parts_.models);
  std::vector<Watched> watched;
  std::unordered_set<const TensorImpl*> seen;
  for (size_t i = 0; i < optimizer.params().size(); ++i) {
    const Tensor& p = optimizer.params()[i];
    if (!seen.insert(p.impl()).second) continue;
    const auto it = names.find(p.impl());
    watched.push_back({it != names.end() ? it->second : fmt::format("optimizer parameter {}", i), p});
  }
  if (first) {  // the parameters no optimizer holds (frozen ones too: they are what a frozen layer is), once
    std::unordered_set<const TensorImpl*> in_optimizers;
    for (const PreparedOptimizer& prepared : parts_.optimizers)
      if (auto opt = prepared.optimizer.lock())
        for (const Tensor& p : opt->params()) in_optimizers.insert(p.impl());
    for (const auto& [name, p] : prepared_named_parameters(parts_.models))
      if (!in_optimizers.count(p.impl()) && seen.insert(p.impl()).second) watched.push_back({name, p, false});
  }
  for (Watched& w : watched) {
    // Sharded strategies may keep a unit's grads only as this rank's shard grad: that counts.
    w.got_grad = w.param.requires_grad() &&
                 (w.param.grad().defined() ||
                  (!parts_.strategy->grads_replicated() && !parts_.strategy->local_grads({w.param}).empty()));
    w.hashable = holds_whole_value(w.param);
    if (w.hashable) w.before = hash_of(w.param);
  }
  return watched;
}

void SanityReport::compare_grads_across_ranks(const std::vector<Watched>& watched) {
  const Environment& env = *parts_.env;
  if (env.world_size() <= 1 || watched.empty()) return;
  if (!parts_.strategy->grads_replicated()) {
    note(fmt::format("gradients are sharded under {} (each rank holds its slice of the average): the cross-rank "
                     "gradient check does not apply",
                     parts_.strategy->name()));
    return;
  }
  const int64_t n = static_cast<int64_t>(watched.size());
  Tensor mine = zeros({n}, DType::i64);
  for (int64_t i = 0; i < n; ++i) {
    const Tensor& g = watched[static_cast<size_t>(i)].param.grad();
    mine.data<int64_t>()[i] = g.defined() ? static_cast<int64_t>(hash_of(g)) : 0;
  }
  Tensor all = empty({n * env.world_size()}, DType::i64);
  env.comm_for(mine).all_gather(mine, all, "sanity check: gradient hashes");
  for (int64_t i = 0; i < n; ++i) {
    std::map<int64_t, std::vector<int>> ranks_of;
    for (int r = 0; r < env.world_size(); ++r) ranks_of[all.data<int64_t>()[r * n + i]].push_back(r);
    if (ranks_of.size() == 1) continue;
    // The largest group (ties: the one with the lowest rank) is the reference; the others differ.
    const auto reference = std::max_element(ranks_of.begin(), ranks_of.end(), [](const auto& a, const auto& b) {
      return a.second.size() != b.second.size() ? a.second.size() < b.second.size() : a.second[0] > b.second[0];
    });
    std::vector<int> differ;
    for (const auto& [hash, ranks] : ranks_of)
      if (&ranks != &reference->second) differ.insert(differ.end(), ranks.begin(), ranks.end());
    std::sort(differ.begin(), differ.end());
    finding(fmt::format("the gradient of {} differs across data-parallel ranks: {} differ{} from {}",
                        watched[static_cast<size_t>(i)].name, ranks_text(differ), differ.size() == 1 ? "s" : "",
                        ranks_text(reference->second)));
  }
}

void SanityReport::before_update(const optim::Optimizer& optimizer) {
  if (checked_.count(&optimizer) || in_progress_) return;
  const bool first = checked_.empty();
  if (first) {
    report_dtypes();
    report_coverage();
  }
  watched_ = watched_for(optimizer, first);
  for (const Watched& w : watched_)
    if (!w.got_grad)
      finding(fmt::format("{} got no gradient{}", w.name,
                          w.param.requires_grad() ? " (it took no part in the loss)" : " (requires_grad is false)"));
  compare_grads_across_ranks(watched_);
  in_progress_ = &optimizer;
}

void SanityReport::report_state_dtypes(const optim::Optimizer& optimizer) {
  std::set<DType> dtypes;
  for (const auto& [key, t] : parts_.strategy->updating_optimizer(optimizer).state_dict())
    if (key != "lr" && t.dim() > 0) dtypes.insert(t.dtype());  // moments, not counts
  size_t index = 0;  // in the order of prepare, as the coverage lines count them
  while (index < parts_.optimizers.size() && parts_.optimizers[index].optimizer.lock().get() != &optimizer) ++index;
  note(fmt::format("optimizer {} ({}): state {}", index, optimizer.type_name(),
                   dtypes.empty() ? "none" : dtypes_text(dtypes)));
}

bool SanityReport::all_optimizers_checked() const {
  for (const PreparedOptimizer& prepared : parts_.optimizers)
    if (auto opt = prepared.optimizer.lock())
      if (!checked_.count(opt.get())) return false;
  return true;
}

void SanityReport::after_update(const optim::Optimizer& optimizer) {
  if (in_progress_ != &optimizer) return;
  bool skipped_values = false;
  for (const Watched& w : watched_) {
    if (!w.hashable || !holds_whole_value(w.param)) {
      skipped_values = true;
      continue;
    }
    if (hash_of(w.param) != w.before) continue;
    finding(fmt::format("{} did not change in the optimizer step{}", w.name,
                        !w.param.requires_grad() ? (w.in_optimizer ? " (frozen)" : " (frozen, and no optimizer holds it)")
                        : !w.in_optimizer      ? " (no optimizer holds it)"
                        : !w.got_grad          ? " (no gradient)"
                                               : ""));
  }
  if (skipped_values)
    note(fmt::format("{} holds parameters sharded outside forward: the did-not-change check does not apply",
                     parts_.strategy->name()));
  parameters_checked_ += watched_.size();
  report_state_dtypes(optimizer);
  checked_.insert(&optimizer);
  in_progress_ = nullptr;
  watched_.clear();
  if (all_optimizers_checked() && !finished_) {
    finished_ = true;
    note(fmt::format("first optimizer step checked ({} parameters, {} optimizer(s), strategy {}): {}",
                     parameters_checked_, checked_.size(), parts_.strategy->name(),
                     findings_.empty() ? "no findings" : fmt::format("{} finding(s)", findings_.size())));
  }
  print_pending();
}

}  // namespace accel
