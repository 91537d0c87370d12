// The training part of `accel test`: data-parallel steps through an Accelerator compared with the
// same steps in this process on the global batch, and accumulated micro-batches compared with one
// large batch.
#pragma once

#include "runtime/cli/check_list.h"

namespace accel {

class Accelerator;

// Trains a small MLP for a few steps (SGD with momentum, then AdamW) through accelerator, from
// weights that differ on every rank until prepare() broadcasts rank 0's, and trains the same model
// here on the unsharded global batches. Checks that every rank ends within 1e-5 of that one-process
// run and that all ranks hold bitwise-identical weights. Collective.
void check_training(Accelerator& accelerator, CheckList& checks);

// Trains through a new Accelerator with gradient_accumulation_steps = k (the other settings from the
// launch) over micro-batches whose epoch ends in a short window, and compares with one process
// stepping once per window on the window's samples. Collective.
void check_accumulation(int k, CheckList& checks);

}  // namespace accel
