// Loading into a deferred-init model: the state's entries recorded as the meta tensors' last init step.
#include "runtime/deferred_load.h"

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "nn/state_match.h"
#include "tensor/deferred_init.h"
#include "tensor/meta_tensor.h"
#include "tensor/nograd/copy.h"

namespace accel {

bool has_meta_tensors(const nn::Module& model) {
  for (const auto& entry : model.state_dict())
    if (entry.second.is_meta()) return true;
  return false;
}

nn::LoadResult load_into_deferred(nn::Module& model, std::shared_ptr<const StateReader> state,
                                  const std::string& origin, bool strict) {
  const nn::StateDict own = model.state_dict();
  std::vector<nn::NamedShape> own_shapes, given;
  for (const auto& [name, t] : own) own_shapes.push_back({name, t.shape()});
  for (const StateEntry& e : state->entries()) given.push_back({e.name, e.shape});
  const nn::StateMatch match = nn::match_state(own_shapes, given, strict, model.type_name());
  NoGradGuard no_grad;
  const DeferredInit real(false);  // what is read here are values, also inside a DeferredInit scope
  for (const auto& [mine, theirs] : match.fits) {
    const Tensor& target = own[mine].second;
    if (!target.is_meta()) {
      nograd::copy_(target, state->read_whole(theirs));
      continue;
    }
    const StateEntry& entry = state->entries()[theirs];
    auto source = std::make_shared<ElementSource>();
    source->read = [state, theirs](int64_t first, int64_t count) { return state->read(theirs, first, count); };
    source->fingerprint = element_source_fingerprint(entry.name, entry.shape, entry.dtype);
    source->description = fmt::format("'{}' of {}", entry.name, origin);
    record_fill(target, FillRecipe::from_source(std::move(source)));
  }
  return match.result;
}

}  // namespace accel
