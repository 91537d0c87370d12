// A fresh directory under the system's temporary one for one test's files, removed with the object.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace test {

struct TempDir {
  std::filesystem::path path;

  // name tells the tests' directories apart; the process id and a count make each one unique, so
  // parallel test processes and two directories in one test never share one.
  explicit TempDir(const std::string& name) : path(std::filesystem::temp_directory_path() / unique_name(name)) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;  // a destructor must not throw
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path / name).string(); }
  // Writes text to the file name in the directory; its path.
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return file(name);
  }

 private:
  static std::string unique_name(const std::string& name) {
    static std::atomic<int> count{0};
    return "accel-test-" + name + "-" + std::to_string(getpid()) + "-" + std::to_string(count++);
  }
};

}  // namespace test
