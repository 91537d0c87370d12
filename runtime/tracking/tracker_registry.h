// The built-in trackers by name: the tracker each name of runtime/tracking/tracker_names.h makes.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "runtime/tracking/tracker.h"
#include "runtime/tracking/tracker_names.h"

namespace accel {

// The tracker a built-in name makes, writing into run_dir (which exists).
std::unique_ptr<Tracker> make_builtin_tracker(const std::string& name, const std::filesystem::path& run_dir);

}  // namespace accel
