// The collective ledger: each collective is recorded with its seq, op, dtype, count, root and the
// caller's file:line (or an internal caller's name), finished once it completes; the buffer keeps the
// newest entries; derived communicators get names that agree across ranks; debug mode's check
// across ranks throws on every rank when their calls differ.
#include "support.h"

#include <string>

using namespace test;

namespace {

// The newest entry of comm's ledger.
LedgerEntry newest(const Communicator& comm) {
  const std::vector<LedgerEntry> all = comm.ledger().entries();
  REQUIRE(!all.empty());
  return all.back();
}

}  // namespace

TEST_CASE("every collective is in the ledger with its op, dtype, count, root, call site and end") {
  for (Communicator* comm : backends()) {
    INFO(comm->backend());
    const uint64_t before = comm->ledger().last_seq();
    Tensor t = zeros({6});
    comm->all_reduce(t);
    const int line = __LINE__ - 1;
    LedgerEntry e = newest(*comm);
    CHECK(e.seq == before + 1);
    CHECK(e.op == "all_reduce");
    CHECK(e.dtype == DType::f32);
    CHECK(e.count == 6);
    CHECK(e.root == -1);
    CHECK(e.site == fmt::format("test_ledger.cpp:{}", line));
    CHECK(e.finished_ns >= e.entered_ns);
    CHECK(e.finished_ns > 0);
    CHECK_FALSE(e.failed);

    Tensor ids = zeros({3}, DType::i64);
    comm->broadcast_async(ids, comm->size() - 1, "loader ids").wait();
    e = newest(*comm);
    CHECK(e.seq == before + 2);
    CHECK(e.op == "broadcast");
    CHECK(e.dtype == DType::i64);
    CHECK(e.root == comm->size() - 1);
    CHECK(e.site == "loader ids");
    CHECK(e.finished_ns > 0);
    LedgerEntry running;
    CHECK_FALSE(comm->ledger().oldest_running(running));
  }
}

TEST_CASE("the ledger keeps the newest ACCEL_LEDGER_SIZE entries") {
  CollectiveLedger ledger("test", 3);
  for (int i = 0; i < 5; ++i) ledger.finish(ledger.enter("barrier", DType::f32, 0, -1, "step"), false);
  const uint64_t open = ledger.enter("all_gather", DType::f32, 4, -1, "open");
  const std::vector<LedgerEntry> kept = ledger.entries();
  REQUIRE(kept.size() == 3);
  CHECK(kept[0].seq == 4);
  CHECK(kept[2].seq == open);
  LedgerEntry running;
  REQUIRE(ledger.oldest_running(running));
  CHECK(running.seq == 6);
  CHECK(running.site == "open");
  ledger.finish(1, true);  // long pushed out: nothing to mark
  CHECK(ledger.entries()[0].seq == 4);
}

TEST_CASE("derived communicators are named alike on every rank") {
  Communicator& world = mpi();
  const std::unique_ptr<Communicator> a = world.dup();
  const std::unique_ptr<Communicator> b = world.dup();
  const std::string prefix = world.name() + "/dup";
  REQUIRE(a->name().rfind(prefix, 0) == 0);
  const int k = std::stoi(a->name().substr(prefix.size()));
  CHECK(b->name() == prefix + std::to_string(k + 1));
  const std::unique_ptr<Communicator> half = world.split(world.rank() % 2, world.rank());
  CHECK(half->name() == fmt::format("{}/split{}.{}", world.name(), k + 2, world.rank() % 2));
  // The same names on every rank: the largest hash over the ranks is each rank's own.
  for (const std::string& name : {a->name(), b->name()}) {
    const double mine = static_cast<double>(std::hash<std::string>{}(name) % 1000003);
    Tensor biggest = full({1}, mine, DType::f64);
    world.all_reduce(biggest, ReduceOp::max);
    CHECK(biggest.item() == mine);
  }
}

TEST_CASE("debug mode: ranks that call different collectives all throw, naming each rank's call") {
  Communicator& world = mpi();
  const int n = world.size(), rank = world.rank();
  set_collective_checks(true);
  Tensor t = zeros({static_cast<int64_t>(4 + 4 * rank)});
  std::string message;
  const int line = __LINE__ + 2;
  try {
    world.all_reduce(t);
  } catch (const Error& e) {
    message = e.what();
  }
  set_collective_checks(false);
  if (n == 1) {
    CHECK(message.empty());
    return;
  }
  std::string each;
  for (int r = 0; r < n; ++r) each += fmt::format("{}rank {} all_reduce f32 x {}", r ? ", " : "", r, 4 + 4 * r);
  CHECK(message == fmt::format("all_reduce at test_ledger.cpp:{} on communicator world: the ranks called different "
                               "collectives ({}); every rank must make the same calls in the same order (found by the "
                               "debug mode's check)",
                               line, each));
}
