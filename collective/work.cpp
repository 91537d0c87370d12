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
  finished(false);
}

void WorkState::fail(std::string message) {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
    failed_ = true;
    error_ = std::move(message);
  }
  finished_.notify_all();
  finished(true);
}

void WorkState::when_finished(std::function<void(bool failed)> f) {
  std::unique_lock lock(callback_mutex_);
  if (reported_) {
    const bool failed = reported_failed_;
    lock.unlock();
    f(failed);
    return;
  }
  on_finished_ = std::move(f);
}

void WorkState::finished(bool failed) {
  std::function<void(bool)> f;
  {
    std::lock_guard lock(callback_mutex_);
    if (reported_) return;
    reported_ = true;
    reported_failed_ = failed;
    f = std::move(on_finished_);
  }
  if (f) f(failed);
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
  try {
    state_->wait();
  } catch (...) {
    state_->finished(true);
    throw;
  }
  state_->finished(false);
}

bool Work::test() const {
  if (!state_) throw Error("Work::test: this handle holds no operation (default-constructed)");
  const bool done = state_->test();
  if (done) state_->finished(false);  // a failure is reported by wait(), which test() does not raise
  return done;
}

void Work::when_finished(std::function<void(bool failed)> f) const {
  if (!state_) throw Error("Work::when_finished: this handle holds no operation (default-constructed)");
  state_->when_finished(std::move(f));
}

}  // namespace accel
