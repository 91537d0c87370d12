// WorkQueue: a condition-variable task queue drained by one thread.
#include "collective/work_queue.h"

#include <exception>
#include <optional>
#include <string>

namespace accel {

// A task's state that knows its queue, so that wait() can run the task when it is next in line.
class WorkQueue::TaskState : public WorkState {
 public:
  explicit TaskState(WorkQueue* queue) : queue_(queue) {}
  void wait() override {
    // A finished task no longer needs its queue (which may be gone: its destructor drains it).
    if (!test()) queue_->run_if_next(this);
    WorkState::wait();
  }

 private:
  WorkQueue* queue_;
};

WorkQueue::WorkQueue() : thread_([this] { loop(); }) {}

WorkQueue::~WorkQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

Work WorkQueue::submit(std::function<void()> task) {
  auto state = std::make_shared<TaskState>(this);
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back(Task{std::move(task), state});
  }
  wake_.notify_one();
  return Work(state);
}

void WorkQueue::loop() {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return (stopping_ || !tasks_.empty()) && !running_; });
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = take_front();
    }
    run_taken(task);
  }
}

bool WorkQueue::run_if_next(const WorkState* state) {
  Task task;
  {
    std::lock_guard lock(mutex_);
    if (running_ || tasks_.empty() || tasks_.front().state.get() != state) return false;
    task = take_front();
  }
  run_taken(task);
  wake_.notify_one();  // the thread may have tasks queued behind this one
  return true;
}

WorkQueue::Task WorkQueue::take_front() {
  Task task = std::move(tasks_.front());
  tasks_.pop_front();
  running_ = true;
  return task;
}

void WorkQueue::run_taken(Task& task) {
  std::optional<std::string> error;
  try {
    task.run();
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "WorkQueue: a task threw something that is not a std::exception";
  }
  // The task's captures (a collective's tensors) go before its Work completes: a caller whose wait()
  // has returned must find their memory freed, or the allocators' counts depend on which thread won.
  task.run = nullptr;
  if (error) {
    task.state->fail(*error);
  } else {
    task.state->complete();
  }
  std::lock_guard lock(mutex_);
  running_ = false;
}

}  // namespace accel
