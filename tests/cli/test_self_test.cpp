// The checks of `accel test` catch a wrong collective: run over a correct one-rank communicator they
// all pass, and over one that corrupts a single operation exactly the checks of that operation fail.
// Also the verdict line's wording.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <sstream>

#include "accel.h"
#include "runtime/cli/check_list.h"
#include "runtime/cli/collective_checks.h"
#include "runtime/cli/self_test.h"
#include "tensor/nograd/copy.h"

using namespace accel;

namespace {

Work done() {
  auto state = std::make_shared<WorkState>();
  state->complete();
  return Work(state);
}

void copy_bytes(const Tensor& from, const Tensor& to) {
  REQUIRE(from.nbytes() == to.nbytes());
  if (from.data_ptr() != to.data_ptr()) std::memcpy(to.data_ptr(), from.data_ptr(), from.nbytes());
}

// One rank, no MPI: every collective is a copy, send/recv go through a mailbox keyed by tag. With
// corrupt_f16_avg, element 3 of every f16 avg all_reduce comes out 1 too large.
class LoopbackCommunicator final : public Communicator {
 public:
  explicit LoopbackCommunicator(bool corrupt_f16_avg = false) : corrupt_(corrupt_f16_avg) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* backend() const override { return "loopback"; }
  std::unique_ptr<Communicator> create_dup() override { return std::make_unique<LoopbackCommunicator>(corrupt_); }

 protected:
  Work start_all_reduce(const Tensor& in, const Tensor& out, ReduceOp op, bool) override {
    copy_bytes(in, out);
    if (corrupt_ && op == ReduceOp::avg && out.dtype() == DType::f16 && out.numel() > 3)
      out.data<Half>()[3] = Half(static_cast<float>(out.data<Half>()[3]) + 1.0f);
    return done();
  }
  Work start_broadcast(const Tensor&, int) override { return done(); }
  Work start_all_gather(const Tensor& in, const Tensor& out, bool) override {
    copy_bytes(in, out);
    return done();
  }
  Work start_reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp, bool) override {
    copy_bytes(in, out);
    return done();
  }
  Work start_gather(const Tensor& in, const Tensor& out, int) override {
    copy_bytes(in, out);
    return done();
  }
  Work start_barrier() override { return done(); }
  Work start_send(const Tensor& tensor, int, int tag) override {
    mailbox_[tag] = nograd::clone(tensor);
    return done();
  }
  Work start_recv(const Tensor& tensor, int, int tag) override {
    REQUIRE(mailbox_.count(tag) == 1);
    copy_bytes(mailbox_.at(tag), tensor);
    mailbox_.erase(tag);
    return done();
  }
  std::unique_ptr<Communicator> create_split(int color, int) override {
    if (color == kNoColor) return nullptr;
    return std::make_unique<LoopbackCommunicator>(corrupt_);
  }

 private:
  bool corrupt_;
  std::map<int, Tensor> mailbox_;
};

}  // namespace

TEST_CASE("the collective checks pass over a correct communicator, every dtype and op") {
  LoopbackCommunicator comm;
  std::ostringstream log;
  CheckList checks(0, log);
  check_collectives(comm, checks);
  CHECK(log.str() == "");
  CHECK(checks.failed_anywhere(nullptr).empty());
  // 7 dtypes x 3 sizes x (4 ops, 3 for bool) x 2 forms each of all_reduce and reduce_scatter (fp8 is
  // never reduced), + 9 dtypes x 3 sizes x broadcast, send/recv, 2 all_gathers and gather, + barrier and async.
  const int per_size_ops = 6 * 4 * 2 * 2 + 1 * 3 * 2 * 2;
  CHECK(checks.size() == 3 * per_size_ops + 9 * 3 * 5 + 2);
  CHECK(checks.names()[0] == "loopback all_reduce sum f64 n=1");
}

TEST_CASE("a communicator that gets one element of f16 averages wrong fails exactly those checks") {
  LoopbackCommunicator comm(/*corrupt_f16_avg=*/true);
  std::ostringstream log;
  CheckList checks(0, log);
  check_collectives(comm, checks);
  // n = 1 has no element 3; n = 5 and 1031, in and out of place.
  CHECK(checks.failed_anywhere(nullptr) ==
        std::vector<std::string>{"loopback all_reduce avg f16 n=5", "loopback all_reduce avg f16 n=5 in place",
                                 "loopback all_reduce avg f16 n=1031", "loopback all_reduce avg f16 n=1031 in place"});
  CHECK(log.str().find("accel test: rank 0: loopback all_reduce avg f16 n=5: 1 of 5 elements differ; first at 3: got ") ==
        0);
}

TEST_CASE("CheckList: an exception is the check's problem") {
  std::ostringstream log;
  CheckList checks(2, log);
  checks.run("throws", []() -> std::string { throw Error("f: bad input"); });
  checks.run("passes", [] { return std::string(); });
  CHECK(checks.size() == 2);
  CHECK(checks.failed_here(0));
  CHECK(!checks.failed_here(1));
  CHECK(log.str() == "accel test: rank 2: throws: threw: f: bad input\n");
}

TEST_CASE("the verdict line") {
  SelfTestResult r;
  r.checks = 866;
  r.ranks = 4;
  r.backend = "mpi";
  CHECK(r.verdict() == "accel test: PASS (866 checks, 4 ranks, backend mpi)");
  r.ranks = 1;
  r.backend = "none";
  r.not_checked = "collectives (this build has no MPI)";
  CHECK(r.verdict() == "accel test: PASS (866 checks, 1 rank, backend none; not checked: collectives (this build has no MPI))");
  r.not_checked.clear();
  r.failed = {"a", "b"};
  CHECK(!r.passed());
  CHECK(r.verdict() == "accel test: FAIL (2 of 866 checks failed: a, b; 1 rank, backend none)");
  r.failed = {"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"};
  CHECK(r.verdict() == "accel test: FAIL (10 of 866 checks failed: 1, 2, 3, 4, 5, 6, 7, 8 and 2 more; 1 rank, backend none)");
  SelfTestResult none;
  CHECK(!none.passed());
  CHECK(none.verdict() == "accel test: FAIL (no checks ran, 1 rank, backend unknown)");
}
