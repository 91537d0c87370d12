// Checkpoint directories: the staging directory, fsync'ed writes, the commit, and automatic naming.
#include "runtime/checkpoint/checkpoint_dir.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "kernels/error.h"

namespace accel {

namespace {

void fsync_path(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) throw Error(fmt::format("checkpoint: cannot open '{}' to sync it: {}", path.string(), std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw Error(fmt::format("checkpoint: fsync of '{}' failed: {}", path.string(), std::strerror(err)));
}

// n of a directory named checkpoint_<n>, or -1.
int64_t checkpoint_number(const fs::path& dir) {
  const std::string name = dir.filename().string();
  const std::string prefix = "checkpoint_";
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) return -1;
  int64_t n = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || n > (INT64_MAX - 9) / 10) return -1;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

// The checkpoint_<n> directories under root, by n.
std::vector<std::pair<int64_t, fs::path>> numbered(const fs::path& project_dir) {
  std::vector<std::pair<int64_t, fs::path>> out;
  const fs::path root = checkpoints_root(project_dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(root)) {
    const int64_t n = checkpoint_number(e.path());
    if (n >= 0 && e.is_directory()) out.emplace_back(n, e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

CheckpointStageHook& stage_hook() {
  static CheckpointStageHook hook;
  return hook;
}

}  // namespace

void set_checkpoint_stage_hook(CheckpointStageHook hook) { stage_hook() = std::move(hook); }

void checkpoint_stage(const std::string& stage) {
  if (stage_hook()) stage_hook()(stage);
}

fs::path replaced_dir(const fs::path& dir) { return dir.parent_path() / (dir.filename().string() + ".replaced"); }

fs::path resolve_checkpoint(const char* op, const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec) && is_complete_checkpoint(replaced_dir(dir))) return replaced_dir(dir);
  require_complete_checkpoint(op, dir);
  return dir;
}

bool is_complete_checkpoint(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / kCheckpointMarker, ec);
}

void require_complete_checkpoint(const char* op, const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error(fmt::format("{}: no checkpoint directory '{}'", op, dir.string()));
  if (!is_complete_checkpoint(dir))
    throw Error(fmt::format("{}: '{}' is an incomplete checkpoint (no {} marker: its save did not finish); load "
                            "an earlier one or \"latest\"",
                            op, dir.string(), kCheckpointMarker));
}

fs::path staging_dir(const fs::path& dir) {
  fs::path d = dir;
  if (d.filename().empty()) d = d.parent_path();  // a trailing slash
  return d.parent_path() / (d.filename().string() + ".staging");
}

std::string read_checkpoint_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(fmt::format("load_state: {}: cannot be opened", file.string()));
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_synced(const fs::path& path, const std::string& text) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw Error(fmt::format("checkpoint: writing '{}' failed", path.string()));
  }
  fsync_path(path, O_RDONLY);
}

void commit_checkpoint(const fs::path& staging, const fs::path& dir) {
  write_synced(staging / kCheckpointMarker, "complete\n");
  fsync_path(staging, O_RDONLY | O_DIRECTORY);
  checkpoint_stage("marker written");
  std::error_code ec;
  fs::path aside;
  if (fs::exists(dir, ec)) {
    aside = replaced_dir(dir);
    fs::remove_all(aside, ec);
    fs::rename(dir, aside);
    checkpoint_stage("old checkpoint moved aside");
  }
  fs::rename(staging, dir);
  checkpoint_stage("renamed into place");
  fsync_path(dir.parent_path().empty() ? fs::path(".") : dir.parent_path(), O_RDONLY | O_DIRECTORY);
  checkpoint_stage("parent synced");
  if (!aside.empty()) {
    fs::remove_all(aside, ec);
    checkpoint_stage("old checkpoint deleted");
  }
}

fs::path checkpoints_root(const fs::path& project_dir) { return project_dir / "checkpoints"; }

std::vector<fs::path> complete_checkpoints(const fs::path& project_dir) {
  std::vector<fs::path> out;
  for (const auto& [n, dir] : numbered(project_dir))
    if (is_complete_checkpoint(dir)) out.push_back(dir);
  return out;
}

std::optional<fs::path> latest_checkpoint(const fs::path& project_dir) {
  const std::vector<fs::path> all = complete_checkpoints(project_dir);
  if (all.empty()) return std::nullopt;
  return all.back();
}

fs::path next_checkpoint(const fs::path& project_dir) {
  const auto all = numbered(project_dir);
  const int64_t n = all.empty() ? 0 : all.back().first + 1;
  return checkpoints_root(project_dir) / fmt::format("checkpoint_{}", n);
}

void prune_checkpoints(const fs::path& project_dir, int total_limit) {
  const auto all = numbered(project_dir);
  std::vector<fs::path> complete;
  for (const auto& [n, dir] : all)
    if (is_complete_checkpoint(dir)) complete.push_back(dir);
  std::error_code ec;
  if (!complete.empty()) {
    const int64_t newest = checkpoint_number(complete.back());
    for (const auto& [n, dir] : all)
      if (n < newest && !is_complete_checkpoint(dir)) fs::remove_all(dir, ec);
  }
  if (total_limit <= 0) return;
  for (size_t i = 0; i + static_cast<size_t>(total_limit) < complete.size(); ++i) fs::remove_all(complete[i], ec);
}

}  // namespace accel
