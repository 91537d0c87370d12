// SanityReport: the first-step sanity report (AcceleratorOptions::check, ACCEL_CHECK=1, accel launch
// --check). Around the first real update of each prepared optimizer it looks at every parameter, and
// the main process prints one "accel check: " line per finding on stderr, then a summary line.
#pragma once

#include <cstdint>
#include <iostream>
#include <string>
#include <unordered_set>
#include <vector>

#include "runtime/checkpoint/training_checkpoint.h"
#include "runtime/training_step.h"
#include "tensor/tensor.h"

namespace accel {

class SanityReport final : public StepObserver {
 public:
  // parts: what was prepared (models, optimizers, the strategy, the precision, the environment); it
  // outlives the report. out: where the main process prints.
  explicit SanityReport(const TrainingParts& parts, std::ostream& out = std::cerr);

  // Collective on the first update of each optimizer (one all-gather of the grads' hashes where the
  // strategy replicates grads); nothing afterwards.
  void before_update(const optim::Optimizer& optimizer) override;
  void after_update(const optim::Optimizer& optimizer) override;

  // The findings so far, each a line without the "accel check: " prefix. Every rank keeps its own;
  // the cross-rank ones are the same on every rank.
  const std::vector<std::string>& findings() const { return findings_; }
  // Every line so far (dtypes, notes, findings, the summary), without the prefix.
  const std::vector<std::string>& lines() const { return lines_; }
  // Whether every optimizer prepared so far has had its first update checked.
  bool finished() const { return finished_; }

 private:
  // One parameter the update in progress should have moved.
  struct Watched {
    std::string name;
    Tensor param;
    bool in_optimizer = true;
    bool got_grad = false;
    bool hashable = true;  // false where the strategy holds no whole value outside forward (zero_3)
    uint64_t before = 0;
  };

  // Static findings, once: what the optimizers hold against what the models hold; the dtypes.
  void report_coverage();
  void report_dtypes();
  std::vector<Watched> watched_for(const optim::Optimizer& optimizer, bool first);
  // The grads of watched compared across the data-parallel ranks (one all-gather), or a note why not.
  void compare_grads_across_ranks(const std::vector<Watched>& watched);
  void report_state_dtypes(const optim::Optimizer& optimizer);
  bool all_optimizers_checked() const;
  void finding(std::string text);
  void note(std::string text);
  void print_pending();

  const TrainingParts& parts_;
  std::ostream& out_;
  bool print_ = false;
  std::unordered_set<const optim::Optimizer*> checked_;
  const optim::Optimizer* in_progress_ = nullptr;
  std::vector<Watched> watched_;
  size_t parameters_checked_ = 0;
  std::vector<std::string> findings_, lines_;
  size_t printed_ = 0;
  bool finished_ = false;
};

}  // namespace accel
