// WorkQueue: one thread that runs submitted tasks one at a time, in submission order, and completes
// each task's Work. The backends run their collectives on one, so they overlap the caller's compute.
// A caller that waits for a task the thread has not started, while the thread is idle, runs the task
// itself: a blocking collective then costs no hand-off between threads, and the order is unchanged.
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
  class TaskState;
  struct Task {
    std::function<void()> run;
    std::shared_ptr<TaskState> state;
  };
  void loop();
  // Runs the task of state on the calling thread if it is next and no task is running; false if not.
  bool run_if_next(const WorkState* state);
  // With mutex_ held: pops the next task and marks a task as running.
  Task take_front();
  // Runs a task from take_front, completes its Work, and clears the running mark.
  void run_taken(Task& task);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Task> tasks_;
  bool running_ = false;  // a task runs, on the thread or on a waiting caller
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the members it uses exist
};

}  // namespace accel
