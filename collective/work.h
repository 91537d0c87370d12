// Work: the handle an async collective returns. wait() blocks until the operation finished and raises
// its error as accel::Error; test() asks without blocking. WorkState is the side a backend completes.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

namespace accel {

// Shared between the caller's Work and the backend thread that runs the operation.
class WorkState {
 public:
  void complete();                   // the operation succeeded
  void fail(std::string message);    // the operation failed; wait() throws accel::Error(message)
  void wait();
  bool test();

 private:
  std::mutex mutex_;
  std::condition_variable finished_;
  bool done_ = false;
  bool failed_ = false;
  std::string error_;
};

class Work {
 public:
  Work() = default;  // holds no operation: wait() and test() throw
  explicit Work(std::shared_ptr<WorkState> state) : state_(std::move(state)) {}

  // Blocks until the operation has finished. Throws accel::Error if it failed, on every call.
  void wait() const;
  // True once the operation has finished (then wait() returns or throws at once). Never blocks.
  bool test() const;
  bool valid() const { return state_ != nullptr; }

 private:
  std::shared_ptr<WorkState> state_;
};

}  // namespace accel
