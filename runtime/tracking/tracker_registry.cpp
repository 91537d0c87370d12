// The objects the built-in trackers' names make.
#include "runtime/tracking/tracker_registry.h"

#include <fmt/format.h>

#include "kernels/error.h"
#include "runtime/tracking/csv_tracker.h"
#include "runtime/tracking/jsonl_tracker.h"
#include "runtime/tracking/tensorboard_tracker.h"

namespace accel {

std::unique_ptr<Tracker> make_builtin_tracker(const std::string& name, const std::filesystem::path& run_dir) {
  if (name == "jsonl") return std::make_unique<JsonlTracker>(run_dir);
  if (name == "csv") return std::make_unique<CsvTracker>(run_dir);
  if (name == "tensorboard") return std::make_unique<TensorBoardTracker>(run_dir);
  throw Error(fmt::format("make_builtin_tracker: unknown tracker '{}'; expected jsonl, csv or tensorboard", name));
}

}  // namespace accel
