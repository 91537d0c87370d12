// WorkQueue: one thread that runs submitted tasks one at a time, in submission order, and completes
// each task's Work. The ring backend runs its collectives on one, so they overlap the caller's compute.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "collective/work.h"

namespace accel {

class WorkQueue {
 public:
  WorkQueue();
  // Runs every task still queued, then joins the thread.
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues task; an exception it throws becomes the Work's error (raised from wait()).
  Work submit(std::function<void()> task);

 private:
  struct Task {
    std::function<void()> run;
    std::shared_ptr<WorkState> state;
  };
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Task> tasks_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the members it uses exist
};

}  // namespace accel
