// JsonlTracker: each record is written and flushed at once, so a crashed run keeps what it logged.
#include "runtime/tracking/jsonl_tracker.h"

#include <fmt/format.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "kernels/error.h"

namespace accel {

namespace {
double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

JsonlTracker::JsonlTracker(const std::filesystem::path& run_dir)
    : path_(run_dir / "metrics.jsonl"), out_(path_, std::ios::trunc) {
  if (!out_) throw Error(fmt::format("JsonlTracker: cannot write '{}'", path_.string()));
}

void JsonlTracker::write_line(const nlohmann::json& record) {
  if (!out_.is_open()) throw Error(fmt::format("JsonlTracker: '{}' is closed (finish was called)", path_.string()));
  // NaN and inf have no JSON form: they are written as null.
  out_ << record.dump() << '\n' << std::flush;
  if (!out_) throw Error(fmt::format("JsonlTracker: writing '{}' failed", path_.string()));
}

void JsonlTracker::store_init_configuration(const nlohmann::json& config) { write_line({{"config", config}}); }

void JsonlTracker::log(const nlohmann::json& values, int64_t step) {
  write_line({{"step", step}, {"time", unix_seconds()}, {"values", values}});
}

void JsonlTracker::finish() {
  if (out_.is_open()) out_.close();
}

}  // namespace accel
