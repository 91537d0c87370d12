// GradientState: what the Accelerator and the DataLoaders it prepared share during training: where
// the loader is in its epoch (for accumulation windows and gather_for_metrics) and whether this
// micro-step synchronises gradients (for the prepared optimizers' step hook).
#pragma once

#include <cstdint>

namespace accel {

struct GradientState {
  // Written by a prepared DataLoader each time it produces a batch.
  uint64_t batches = 0;         // batches produced so far, by every prepared loader together
  int64_t step = -1;            // the latest batch's step within its epoch
  int64_t steps_per_epoch = 0;  // of the loader that produced it
  int64_t padding = 0;          // its trailing rows that repeat earlier samples (even_batches)

  // Written by the Accelerator.
  bool sync_gradients = true;  // this micro-step ends an accumulation window (or there is none)
  // A window's earlier micro-batches left grads in .grad that the optimizer has not used yet, so
  // zero_grad must keep them.
  bool grads_pending = false;
};

}  // namespace accel
