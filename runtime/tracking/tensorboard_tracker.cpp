// TensorBoardTracker: each event is framed, written and flushed at once, so TensorBoard shows a
// running job's values as they come.
#include "runtime/tracking/tensorboard_tracker.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <nlohmann/json.hpp>

#include "kernels/error.h"
#include "runtime/process_state.h"
#include "runtime/tracking/event_proto.h"
#include "runtime/tracking/tfrecord.h"

namespace accel {

namespace {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// TensorBoard's file name: events.out.tfevents.<seconds>.<host> (it finds files by the prefix).
std::filesystem::path event_file_in(const std::filesystem::path& run_dir) {
  const auto seconds = static_cast<long long>(unix_seconds());
  return run_dir / fmt::format("events.out.tfevents.{}.{}", seconds, host_name());
}

}  // namespace

TensorBoardTracker::TensorBoardTracker(const std::filesystem::path& run_dir)
    : path_(event_file_in(run_dir)), out_(path_, std::ios::binary | std::ios::trunc) {
  if (!out_) throw Error(fmt::format("TensorBoardTracker: cannot write '{}'", path_.string()));
  write_event(file_version_event(unix_seconds()));
}

void TensorBoardTracker::write_event(const std::string& event) {
  if (!out_.is_open()) throw Error(fmt::format("TensorBoardTracker: '{}' is closed (finish was called)", path_.string()));
  out_ << tfrecord(event) << std::flush;
  if (!out_) throw Error(fmt::format("TensorBoardTracker: writing '{}' failed", path_.string()));
}

void TensorBoardTracker::store_init_configuration(const nlohmann::json& config) {
  // Markdown: the Text tab shows a code block as written.
  write_event(text_event(unix_seconds(), 0, "config", "```\n" + config.dump(2) + "\n```"));
}

void TensorBoardTracker::log(const nlohmann::json& values, int64_t step) {
  std::vector<std::pair<std::string, float>> scalars;
  for (const auto& [name, value] : values.items()) scalars.emplace_back(name, value.get<float>());
  write_event(scalars_event(unix_seconds(), step, scalars));
}

void TensorBoardTracker::finish() {
  if (out_.is_open()) out_.close();
}

}  // namespace accel
