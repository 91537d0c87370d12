// CollectiveLedger: each communicator's record of its recent collectives (a ring buffer, the last
// 2,000 by default): a sequence number, the op, dtype, element count, root, call site, and when it
// entered and finished. A stall report compares the ranks' ledgers to say who waits where.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collective/call_site.h"
#include "kernels/dtype.h"

namespace accel {

struct LedgerEntry {
  uint64_t seq = 0;        // 1, 2, ... per communicator, the same on every rank for the same call
  std::string op;          // "all_reduce", "broadcast", ...
  DType dtype = DType::f32;
  int64_t count = 0;       // elements this rank sends (or receives, for gather's root)
  int root = -1;           // broadcast and gather; -1 for the others
  std::string site;        // CallSite::str()
  int64_t entered_ns = 0;  // steady clock
  int64_t finished_ns = 0; // 0 while it runs
  bool failed = false;
};

class CollectiveLedger {
 public:
  // name identifies the communicator on every rank alike ("world", "world/dup1", "world/split2.0").
  explicit CollectiveLedger(std::string name, size_t capacity = default_capacity());
  // ACCEL_LEDGER_SIZE, else 2000.
  static size_t default_capacity();

  const std::string& name() const { return name_; }
  void set_name(std::string name);

  // Records a collective as entered now; returns its seq.
  uint64_t enter(const char* op, DType dtype, int64_t count, int root, const CallSite& site);
  // Marks seq finished now (it may have been pushed out of the buffer by then).
  void finish(uint64_t seq, bool failed);

  // The entries still held, oldest first.
  std::vector<LedgerEntry> entries() const;
  // The oldest entry that has not finished, if any.
  bool oldest_running(LedgerEntry& out) const;
  uint64_t last_seq() const;

 private:
  mutable std::mutex mutex_;
  std::string name_;
  size_t capacity_;
  std::vector<LedgerEntry> ring_;  // ring_[seq % capacity_] once full
  uint64_t next_seq_ = 1;
};

// Every live ledger of this process, for the watchdog. Ledgers register themselves while they exist.
std::vector<std::shared_ptr<const CollectiveLedger>> live_ledgers();
std::shared_ptr<CollectiveLedger> make_ledger(std::string name);
// A communicator's ledger once the communicator is gone: kept (the newest 64) so that a rank that is
// leaving can still say which collectives it made, e.g. after its Accelerator has ended.
void retire_ledger(std::shared_ptr<CollectiveLedger> ledger);
std::vector<std::shared_ptr<const CollectiveLedger>> retired_ledgers();

// Nanoseconds on the steady clock (the ledger's time base).
int64_t steady_ns();

// The debug mode's switch (ACCEL_DEBUG): every collective first compares op, dtype, count and root
// across the ranks, and throws on every rank when they differ. Process-wide; off by default.
void set_collective_checks(bool on);
bool collective_checks();

}  // namespace accel
