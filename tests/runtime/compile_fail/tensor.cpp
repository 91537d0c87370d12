// Must not compile: a Tensor given to prepare. Expected: "a Tensor is not prepared".
#include "runtime/accelerator.h"

void prepare_tensor(accel::Accelerator& accelerator, const accel::Tensor& t, std::shared_ptr<accel::nn::Module> m) {
  auto [model, tensor] = accelerator.prepare(m, t);
}
