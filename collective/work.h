// Work: the handle an async collective returns. wait() blocks until the operation finished and raises
// its error as accel::Error; test() asks without blocking. WorkState is the side a backend completes.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace accel {

// Shared between the caller's Work and the backend thread that runs the operation. A backend whose
// operations complete on a GPU stream (nccl) derives from it and overrides wait and test.
class WorkState {
 public:
  virtual ~WorkState() = default;
  void complete();                   // the operation succeeded
  void fail(std::string message);    // the operation failed; wait() throws accel::Error(message)
  virtual void wait();
  virtual bool test();
  // f(failed) runs once, when the operation is seen to finish: on the backend's thread when it
  // completes, else (a backend that completes on a device stream) when wait() or test() returns.
  // At once if that has already happened.
  void when_finished(std::function<void(bool failed)> f);
  void finished(bool failed);  // runs the callback, at most once

 private:
  std::mutex callback_mutex_;
  std::function<void(bool)> on_finished_;
  bool reported_ = false;
  bool reported_failed_ = false;
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
  // nccl: the operation runs on the communication stream; wait() makes the device's compute stream
  // wait for it instead of blocking the host, so any later op (and any copy to the host) sees the
  // result. Only barrier() blocks the host.
  void wait() const;
  // True once the operation has finished (then wait() returns or throws at once). Never blocks.
  bool test() const;
  bool valid() const { return state_ != nullptr; }
  // See WorkState::when_finished.
  void when_finished(std::function<void(bool failed)> f) const;

 private:
  std::shared_ptr<WorkState> state_;
};

}  // namespace accel
