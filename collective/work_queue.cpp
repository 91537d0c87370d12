// WorkQueue: a condition-variable task queue drained by one thread.
#include "collective/work_queue.h"

#include <exception>

namespace accel {

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
  auto state = std::make_shared<WorkState>();
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
      wake_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    try {
      task.run();
      task.state->complete();
    } catch (const std::exception& e) {
      task.state->fail(e.what());
    } catch (...) {
      task.state->fail("WorkQueue: a task threw something that is not a std::exception");
    }
  }
}

}  // namespace accel
