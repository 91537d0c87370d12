// Work and WorkState: a mutex, a condition variable and the outcome of one operation.
#include "collective/work.h"

#include "kernels/error.h"

namespace accel {

void WorkState::complete() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  finished_.notify_all();
}

void WorkState::fail(std::string message) {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
    failed_ = true;
    error_ = std::move(message);
  }
  finished_.notify_all();
}

void WorkState::wait() {
  std::unique_lock lock(mutex_);
  // A condition variable, not a spin: the waiting rank leaves its core to the communication thread.
  finished_.wait(lock, [&] { return done_; });
  if (failed_) throw Error(error_);
}

bool WorkState::test() {
  std::lock_guard lock(mutex_);
  return done_;
}

void Work::wait() const {
  if (!state_) throw Error("Work::wait: this handle holds no operation (default-constructed)");
  state_->wait();
}

bool Work::test() const {
  if (!state_) throw Error("Work::test: this handle holds no operation (default-constructed)");
  return state_->test();
}

}  // namespace accel
