// nn::MLP: its four stages.
#include "nn/mlp.h"

namespace accel::nn {

MLP::MLP(int64_t n_embd, double dropout, Generator& gen) {
  fc_ = register_module("fc", std::make_shared<Linear>(n_embd, 4 * n_embd, true, gen));
  act_ = register_module("act", std::make_shared<GELU>());
  proj_ = register_module("proj", std::make_shared<Linear>(4 * n_embd, n_embd, true, gen));
  drop_ = register_module("drop", std::make_shared<Dropout>(dropout, gen));
}

Tensor MLP::forward_impl(const Tensor& x) { return (*drop_)((*proj_)((*act_)((*fc_)(x)))); }

}  // namespace accel::nn
