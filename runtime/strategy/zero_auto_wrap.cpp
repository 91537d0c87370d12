// auto_wrap_units: a post-order walk that claims each wrapped module's unclaimed parameters.
#include "runtime/strategy/zero_auto_wrap.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <unordered_set>

#include "nn/reads_descendant_parameters.h"

namespace accel {

namespace {

std::string prefixed(const std::string& module, const std::string& param) {
  return module.empty() ? param : module + "." + param;
}

bool owns_parameters_directly(const nn::Module& m) {
  for (const auto& [name, p] : m.named_parameters())
    if (name.find('.') == std::string::npos) return true;
  return false;
}

}  // namespace

std::vector<WrappedUnit> auto_wrap_units(nn::Module& model, const AutoWrapPolicy& policy) {
  if (policy.min_num_params < 0)
    throw Error(fmt::format("auto_wrap: min_num_params must be >= 0, got {}", policy.min_num_params));
  const std::vector<std::pair<std::string, nn::Module*>> modules = model.named_modules();  // pre-order
  const bool by_default = policy.module_types.empty() && policy.min_num_params == 0;
  std::unordered_set<const TensorImpl*> claimed;
  // Parameters a module's own forward reads (a tied head): no unit below that module may take them.
  std::vector<std::pair<std::string, const TensorImpl*>> read_above;  // (reader's name, parameter)
  for (const auto& [name, m] : modules)
    if (const auto* reader = dynamic_cast<const nn::ReadsDescendantParameters*>(m))
      for (const Tensor& p : reader->parameters_read_directly()) read_above.emplace_back(name, p.impl());
  auto read_by_an_ancestor = [&](const std::string& module, const TensorImpl* p) {
    return std::any_of(read_above.begin(), read_above.end(), [&](const auto& r) {
      return r.second == p && (r.first.empty() || module.rfind(r.first + ".", 0) == 0);
    });
  };
  std::vector<std::pair<size_t, WrappedUnit>> units;  // with their pre-order position
  // Post-order: a module's descendants come after it in pre-order, so walking pre-order backwards
  // visits every descendant before its ancestor.
  for (size_t k = modules.size(); k-- > 1;) {  // position 0 is the root
    const auto& [name, m] = modules[k];
    nn::StateDict unclaimed;
    int64_t count = 0;
    for (const auto& [param_name, p] : m->named_parameters()) {
      if (claimed.count(p.impl()) || read_by_an_ancestor(name, p.impl())) continue;
      if (std::any_of(unclaimed.begin(), unclaimed.end(), [&](const auto& e) { return e.second.is_same(p); })) continue;
      unclaimed.emplace_back(prefixed(name, param_name), p);
      count += p.numel();
    }
    if (unclaimed.empty()) continue;
    const auto& types = policy.module_types;
    const bool wrap = by_default ? owns_parameters_directly(*m)
                                 : std::find(types.begin(), types.end(), m->type_name()) != types.end() ||
                                       (policy.min_num_params > 0 && count >= policy.min_num_params);
    if (!wrap) continue;
    for (const auto& [param_name, p] : unclaimed) claimed.insert(p.impl());
    units.push_back({k, {name, m, unclaimed}});
  }
  std::set<std::string> seen_types;
  for (const auto& [name, m] : modules) seen_types.insert(m->type_name());
  for (const std::string& type : policy.module_types)
    if (!seen_types.count(type)) {
      std::string have;
      for (const std::string& t : seen_types) have += (have.empty() ? "" : ", ") + t;
      throw Error(fmt::format("auto_wrap: FSDPPlugin auto_wrap.module_types names '{}', which matches no module of "
                              "this {} (its module types: {})",
                              type, model.type_name(), have));
    }
  std::sort(units.begin(), units.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<WrappedUnit> out;
  for (auto& [position, unit] : units) out.push_back(std::move(unit));
  nn::StateDict rest;
  for (const auto& [name, p] : model.named_parameters())
    if (claimed.insert(p.impl()).second) rest.emplace_back(name, p);
  if (!rest.empty()) out.push_back({"", &model, rest});
  return out;
}

}  // namespace accel
