// send/recv (every dtype, tag matching, count errors, during a collective), barrier ordering and dup isolation.
#include <chrono>
#include <thread>

#include "support.h"

using namespace test;

namespace {
int right_of(const Communicator& c) { return (c.rank() + 1) % c.size(); }
int left_of(const Communicator& c) { return (c.rank() + c.size() - 1) % c.size(); }
}  // namespace

TEST_CASE("send/recv passes every dtype around the ring of ranks") {
  // With one rank, its neighbour is itself: MPI delivers a message to its own sender too.
  for (DType dtype : kAllDTypes) {
    dispatch_all(dtype, "test", [&]<class T>() {
      for (Communicator* comm : backends()) {
        for (int64_t n : {int64_t{0}, int64_t{37}, int64_t{100003}}) {
          INFO(where(*comm, dtype, n, "send/recv"));
          const int rank = comm->rank(), left = left_of(*comm);
          const Tensor out = filled<T>({n}, [&](int64_t i) { return value<T>(rank, i); });
          const Tensor in = empty({n}, dtype);
          Work sent = comm->send_async(out, right_of(*comm), 7);
          comm->recv(in, left, 7);
          sent.wait();
          CHECK_MESSAGE(mismatch<T>(in, [&](int64_t i) { return value<T>(left, i); }) == "",
                        mismatch<T>(in, [&](int64_t i) { return value<T>(left, i); }));
        }
      }
    });
  }
}

TEST_CASE("recv matches messages by tag, not by arrival order") {
  for (Communicator* comm : backends()) {
    INFO(where(*comm, DType::i32, 1, "tags"));
    const Tensor first = from_vector<int32_t>({100 + comm->rank()});
    const Tensor second = from_vector<int32_t>({200 + comm->rank()});
    Work a = comm->send_async(first, right_of(*comm), 1);
    Work b = comm->send_async(second, right_of(*comm), 2);
    const Tensor got2 = empty({1}, DType::i32), got1 = empty({1}, DType::i32);
    comm->recv(got2, left_of(*comm), 2);  // the later message, received first
    comm->recv(got1, left_of(*comm), 1);
    a.wait();
    b.wait();
    CHECK(got1.data<int32_t>()[0] == 100 + left_of(*comm));
    CHECK(got2.data<int32_t>()[0] == 200 + left_of(*comm));
  }
}

TEST_CASE("recv of a shorter or longer message than its tensor fails from wait()") {
  for (Communicator* comm : backends()) {
    INFO(where(*comm, DType::f32, 10, "recv size"));
    const int left = left_of(*comm);
    const Tensor message = zeros({10});
    // Shorter: MPI delivers it quietly; the backend compares the counts.
    Work sent = comm->send_async(message, right_of(*comm), 3);
    CHECK(error_of([&] { comm->recv(zeros({12}), left, 3); }) == fmt::format("recv (mpi): expected 12 elements of f32 from rank {} (tag 3), got 10", left));
    sent.wait();
    // Longer: MPI itself fails the receive, and its error code comes back as accel::Error.
    sent = comm->send_async(message, right_of(*comm), 4);
    Work received = comm->recv_async(zeros({5}), left, 4);
    CHECK_THROWS_WITH_AS(received.wait(), "recv (mpi): MPI_Irecv failed: MPI_ERR_TRUNCATE: message truncated", Error);
    CHECK_THROWS_AS(received.wait(), Error);  // the failure stays
    sent.wait();
  }
}

TEST_CASE("no rank leaves a barrier before every rank has entered it") {
  // steady_clock is CLOCK_MONOTONIC, one clock for all processes of a machine, so entry and exit
  // times of different ranks compare directly.
  const auto now = [] {
    return static_cast<double>(std::chrono::steady_clock::now().time_since_epoch().count());
  };
  for (Communicator* comm : backends()) {
    for (bool async : {false, true}) {
      INFO(where(*comm, DType::f64, 1, async ? "barrier_async" : "barrier"));
      const int last = comm->size() - 1;
      if (comm->rank() == last) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a late rank
      const double entered = now();
      if (async) comm->barrier_async().wait();
      else comm->barrier();
      const double left = now();
      const Tensor entries = empty({comm->size()}, DType::f64);
      mpi().all_gather(from_vector<double>({entered}), entries);
      const auto all = entries.to_vector<double>();
      CHECK(left >= *std::max_element(all.begin(), all.end()));
    }
  }
}

TEST_CASE("dup gives a communicator over the same ranks whose messages stay apart") {
  for (Communicator* comm : backends()) {
    INFO(where(*comm, DType::i64, 1, "dup"));
    std::unique_ptr<Communicator> copy = comm->dup();
    CHECK(copy->rank() == comm->rank());
    CHECK(copy->size() == comm->size());
    CHECK(std::string(copy->backend()) == comm->backend());
    // Same peer, same tag, two communicators: each recv gets the message of its own communicator,
    // although the one on copy was sent first.
    Work on_copy = copy->send_async(from_vector<int64_t>({1}), right_of(*comm), 9);
    Work on_comm = comm->send_async(from_vector<int64_t>({2}), right_of(*comm), 9);
    const Tensor from_comm = empty({1}, DType::i64), from_copy = empty({1}, DType::i64);
    comm->recv(from_comm, left_of(*comm), 9);
    copy->recv(from_copy, left_of(*comm), 9);
    on_copy.wait();
    on_comm.wait();
    CHECK(from_comm.data<int64_t>()[0] == 2);
    CHECK(from_copy.data<int64_t>()[0] == 1);
    const Tensor t = from_vector<int64_t>({comm->rank()});
    copy->all_reduce(t, ReduceOp::max);
    CHECK(t.data<int64_t>()[0] == comm->size() - 1);
  }
}

TEST_CASE("a rank waiting in a collective still receives the message its peer sends before joining it") {
  // Rank 0 starts an all_reduce and then receives from the last rank, which sends first and joins the
  // all_reduce only once its send has completed. The message is large enough to need the receiver
  // (MPI's rendezvous), so a backend that queued the recv behind the unfinished all_reduce would hang.
  const int64_t n = 1 << 20;
  for (Communicator* comm : backends()) {
    INFO(where(*comm, DType::f32, n, "recv during a collective"));
    const int rank = comm->rank(), last = comm->size() - 1;
    const Tensor reduced = filled<float>({1000}, [&](int64_t i) { return value<float>(rank, i); });
    const Tensor message = filled<float>({n}, [&](int64_t i) { return value<float>(last, i); });
    const Tensor received = empty({n}, DType::f32);
    if (rank == 0) {
      Work collective = comm->all_reduce_async(reduced);
      Work sent = rank == last ? comm->send_async(message, 0, 11) : Work();  // one rank: to itself
      comm->recv(received, last, 11);
      if (sent.valid()) sent.wait();
      collective.wait();
      CHECK(mismatch<float>(received, [&](int64_t i) { return value<float>(last, i); }) == "");
    } else if (rank == last) {
      comm->send(message, 0, 11);
      comm->all_reduce(reduced);
    } else {
      comm->all_reduce(reduced);
    }
    CHECK(mismatch<float>(reduced, [&](int64_t i) { return reduce_ref<float>(ReduceOp::sum, comm->size(), i); }) == "");
  }
}
