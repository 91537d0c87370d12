// WorkQueue (collective/): the order and exclusivity its backends rely on, and the waiting caller
// that runs the next task itself instead of handing it to the queue's thread.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "collective/work_queue.h"
#include "kernels/error.h"

using namespace accel;

TEST_CASE("WorkQueue: tasks run one at a time in submission order, whoever runs them") {
  WorkQueue queue;
  std::vector<int> order;
  std::atomic<int> active{0};
  int overlapped = 0;
  std::vector<Work> works;
  for (int i = 0; i < 300; ++i) {
    works.push_back(queue.submit([&, i] {
      if (active.fetch_add(1) != 0) ++overlapped;
      order.push_back(i);
      active.fetch_sub(1);
    }));
    if (i % 3 == 0) works.back().wait();  // the caller may run this one itself
  }
  for (const Work& w : works) w.wait();
  CHECK(overlapped == 0);
  REQUIRE(order.size() == 300);
  for (int i = 0; i < 300; ++i) CHECK(order[static_cast<size_t>(i)] == i);
}

TEST_CASE("WorkQueue: a caller that waits for the next task while the thread is idle runs it itself") {
  WorkQueue queue;
  const std::thread::id caller = std::this_thread::get_id();
  int on_caller = 0;
  for (int i = 0; i < 100; ++i) {
    std::thread::id ran_on;
    queue.submit([&] { ran_on = std::this_thread::get_id(); }).wait();
    on_caller += ran_on == caller ? 1 : 0;
  }
  // The thread needs a wake-up to take a task; the caller, already running, nearly always gets there
  // first. Which one ran a task must not matter, so only "at least once" is asked.
  CHECK(on_caller >= 1);
}

TEST_CASE("WorkQueue: a task's exception is the Work's error, on the thread and on the caller") {
  WorkQueue queue;
  Work failing = queue.submit([] { throw std::runtime_error("task failed: rank 1 sent 3 elements, expected 4"); });
  CHECK_THROWS_WITH_AS(failing.wait(), "task failed: rank 1 sent 3 elements, expected 4", Error);
  CHECK_THROWS_WITH_AS(failing.wait(), "task failed: rank 1 sent 3 elements, expected 4", Error);
  int ran = 0;
  queue.submit([&] { ++ran; }).wait();  // the queue goes on after a failed task
  CHECK(ran == 1);
}

TEST_CASE("WorkQueue: a task's captures are gone when wait() returns, whichever thread ran it") {
  // A collective's task holds its tensors; if the thread dropped them after completing the Work, a
  // caller that just waited would still count their bytes. The capture's destructor is slow on
  // purpose, so that a late release is seen every time rather than now and then.
  struct SlowRelease {
    std::atomic<bool>* released;
    explicit SlowRelease(std::atomic<bool>* r) : released(r) {}
    SlowRelease(const SlowRelease&) = delete;
    ~SlowRelease() {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      released->store(true);
    }
  };
  for (bool failing : {false, true}) {
    const std::string kind = failing ? "a task that throws" : "a task that returns";
    INFO(kind);
    WorkQueue queue;
    std::atomic<bool> started{false}, go{false}, released{false};
    // The first task holds the thread, so the second is not next when the caller waits for it: the
    // caller cannot run it itself, and the thread does.
    Work blocker = queue.submit([&] {
      started.store(true);
      while (!go.load()) std::this_thread::yield();
    });
    while (!started.load()) std::this_thread::yield();
    auto capture = std::make_shared<SlowRelease>(&released);
    Work work = queue.submit([capture = std::move(capture), failing] {
      if (failing) throw std::runtime_error("rank 1 sent 3 elements, expected 4");
    });
    go.store(true);
    if (failing) {
      CHECK_THROWS_AS(work.wait(), Error);
    } else {
      work.wait();
    }
    CHECK(released.load());
    blocker.wait();
  }
}
