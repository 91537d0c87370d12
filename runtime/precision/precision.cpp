// Precision: the defaults, which are those of full f32 training (nothing to scale, copy or skip).
#include "runtime/precision/precision.h"

#include <fmt/format.h>

namespace accel {

void Precision::prepare_model(nn::Module&) {}
void Precision::prepare_optimizer(const std::shared_ptr<optim::Optimizer>&) {}
Tensor Precision::scale_loss(const Tensor& loss) const { return loss; }
bool Precision::scales_grads() const { return false; }
bool Precision::unscale_and_check(const std::vector<Tensor>&) { return false; }
bool Precision::finish_step(bool found_inf) { return !found_inf; }
void Precision::weights_changed() {}
LossScaler* Precision::loss_scaler() { return nullptr; }
optim::StateDict Precision::state_dict() const { return {}; }
void Precision::load_state_dict(const optim::StateDict& state) {
  if (!state.empty())
    throw Error(fmt::format("Precision::load_state_dict: mixed_precision={} keeps no state, but got {} entries "
                            "(the first is '{}')",
                            name(), state.size(), state.front().first));
}

std::string FullPrecision::describe() const { return policy_.describe() + ", no loss scaler"; }

}  // namespace accel
