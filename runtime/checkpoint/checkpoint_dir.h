// Checkpoint directories: written whole or not at all. Files go into a staging directory next to the
// target, each fsync'ed; the commit marker is written last; then the staging directory is renamed
// into place. A directory without the marker is incomplete: "latest" never picks it, and loading it
// by name is an error. With automatic naming the checkpoints are root/checkpoints/checkpoint_<n>.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace accel {

namespace fs = std::filesystem;

// The commit marker's file name.
inline constexpr const char* kCheckpointMarker = "COMPLETE";

bool is_complete_checkpoint(const fs::path& dir);
// Throws an accel::Error naming dir when it is missing or has no commit marker.
void require_complete_checkpoint(const char* op, const fs::path& dir);

// Where dir is assembled before it is committed: dir's name with ".staging".
fs::path staging_dir(const fs::path& dir);
// Writes text to path and fsyncs it.
void write_synced(const fs::path& path, const std::string& text);
// A checkpoint's text file (JSON), whole; "load_state: FILE: cannot be opened" when it cannot be.
std::string read_checkpoint_text(const fs::path& file);
// Writes the marker into staging, renames staging to dir and fsyncs dir's parent. An existing dir is
// moved aside first and deleted once the new one is in place.
void commit_checkpoint(const fs::path& staging, const fs::path& dir);

// Where a checkpoint that was being replaced in place went, until its successor is committed. load_state
// takes it when dir itself is missing (a save that died between moving the old one aside and renaming
// the new one in).
fs::path replaced_dir(const fs::path& dir);
// dir if it is complete, else its replaced_dir() if that is; otherwise throws as
// require_complete_checkpoint.
fs::path resolve_checkpoint(const char* op, const fs::path& dir);

// Called with the name of each step of a save as the save reaches it ("wrote model.safetensors",
// "renamed into place", ...): for tests that stop a save at every moment, or for progress reports.
// Process-wide; none by default.
using CheckpointStageHook = std::function<void(const std::string& stage)>;
void set_checkpoint_stage_hook(CheckpointStageHook hook);
void checkpoint_stage(const std::string& stage);

// Automatic naming under root (a ProjectConfiguration's project_dir).
fs::path checkpoints_root(const fs::path& project_dir);
// The complete checkpoint_<n> directories, oldest (smallest n) first.
std::vector<fs::path> complete_checkpoints(const fs::path& project_dir);
std::optional<fs::path> latest_checkpoint(const fs::path& project_dir);
// checkpoint_<n> with n one more than any checkpoint_<n> there, complete or not.
fs::path next_checkpoint(const fs::path& project_dir);
// Deletes the oldest complete checkpoints beyond total_limit (0: keep all), and torn ones older than
// the newest complete one.
void prune_checkpoints(const fs::path& project_dir, int total_limit);

}  // namespace accel
