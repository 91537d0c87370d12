// train_gpt2's --profile_ops table: the CPU ops' time per step by kind (tensor/op_time.h), the rest
// as "other", and what the step's FLOP rate was against the plain-matmul rate.
#pragma once

#include <fmt/format.h>

#include <string>

#include "tensor/op_time.h"

namespace accel {

class OpTimeTable {
 public:
  // Counts the ops of the step that follows (the first call starts the counters); what runs between
  // steps (validation, samples, checkpoints) is left out.
  void begin_step() {
    if (!op_time::enabled()) op_time::start();
    before_ = op_time::totals();
    counting_ = true;
  }
  void end_step(double seconds) {
    if (!counting_) return;
    counting_ = false;
    const op_time::Totals after = op_time::totals();
    for (int k = 0; k < op_time::kKinds; ++k) {
      steps_total_.seconds[k] += after.seconds[k] - before_.seconds[k];
      steps_total_.calls[k] += after.calls[k] - before_.calls[k];
    }
    step_seconds_ += seconds;
    ++steps_;
  }

  // step_flops: one rank's FLOPs per step; matmul_gflops: the plain-matmul rate measured in this run.
  std::string str(double step_flops, double matmul_gflops) const {
    if (steps_ == 0) return "per-op time: no step was counted (the first step is warm-up; run at least 2)";
    const op_time::Totals& t = steps_total_;
    const double steps = static_cast<double>(steps_), step_ms = 1e3 * step_seconds_ / steps;
    std::string out = fmt::format("per-op time, mean of {} step(s) after the first:\n{:<14}{:>10}{:>9}{:>12}\n", steps_,
                                  "op", "ms/step", "share", "calls/step");
    double counted_ms = 0;
    for (int k = 0; k < op_time::kKinds; ++k) {
      const double ms = 1e3 * t.seconds[k] / steps;
      counted_ms += ms;
      out += fmt::format("{:<14}{:>10.1f}{:>8.1f}%{:>12.0f}\n", op_time::kind_name(static_cast<op_time::Kind>(k)), ms,
                         100 * ms / step_ms, static_cast<double>(t.calls[k]) / steps);
    }
    out += fmt::format("{:<14}{:>10.1f}{:>8.1f}%\n{:<14}{:>10.1f}{:>8.1f}%\n", "other", step_ms - counted_ms,
                       100 * (step_ms - counted_ms) / step_ms, "step", step_ms, 100.0);
    const double gflops = step_flops / (step_ms * 1e-3) / 1e9;
    out += fmt::format("step: {:.1f} GFLOP/s, {:.1f}% of the plain-matmul rate ({:.1f} GFLOP/s)", gflops,
                       100 * gflops / matmul_gflops, matmul_gflops);
    return out;
  }

 private:
  bool counting_ = false;
  op_time::Totals before_, steps_total_;
  double step_seconds_ = 0;
  int64_t steps_ = 0;
};

}  // namespace accel
