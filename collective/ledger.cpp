// CollectiveLedger: a mutex-guarded ring of entries, and the registry of the live ones.
#include "collective/ledger.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <cstdlib>
#include <string_view>

#include "kernels/error.h"

namespace accel {

std::string CallSite::str() const {
  if (file == nullptr) return label;
  std::string_view path(file);
  const size_t slash = path.rfind('/');
  if (slash != std::string_view::npos) path.remove_prefix(slash + 1);
  return fmt::format("{}:{}", path, line);
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

size_t CollectiveLedger::default_capacity() {
  const char* text = std::getenv("ACCEL_LEDGER_SIZE");
  if (text == nullptr || *text == '\0') return 2000;
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (*end != '\0' || value < 1 || value > 10'000'000)
    throw Error(fmt::format("ACCEL_LEDGER_SIZE is '{}', expected a count of collectives in [1, 10000000]", text));
  return static_cast<size_t>(value);
}

CollectiveLedger::CollectiveLedger(std::string name, size_t capacity) : name_(std::move(name)), capacity_(capacity) {
  ring_.reserve(std::min<size_t>(capacity_, 64));
}

void CollectiveLedger::set_name(std::string name) {
  std::lock_guard lock(mutex_);
  name_ = std::move(name);
}

uint64_t CollectiveLedger::enter(const char* op, DType dtype, int64_t count, int root, const CallSite& site) {
  LedgerEntry e{0, op, dtype, count, root, site.str(), steady_ns(), 0, false};
  std::lock_guard lock(mutex_);
  e.seq = next_seq_++;
  if (ring_.size() < capacity_) ring_.push_back(std::move(e));
  else ring_[(e.seq - 1) % capacity_] = std::move(e);
  return next_seq_ - 1;
}

void CollectiveLedger::finish(uint64_t seq, bool failed) {
  const int64_t now = steady_ns();
  std::lock_guard lock(mutex_);
  LedgerEntry& e = ring_[(seq - 1) % capacity_];
  if (e.seq != seq) return;  // overwritten: 2,000 newer collectives started while it ran
  e.finished_ns = now;
  e.failed = failed;
}

std::vector<LedgerEntry> CollectiveLedger::entries() const {
  std::lock_guard lock(mutex_);
  std::vector<LedgerEntry> out(ring_.begin(), ring_.end());
  std::sort(out.begin(), out.end(), [](const LedgerEntry& a, const LedgerEntry& b) { return a.seq < b.seq; });
  return out;
}

bool CollectiveLedger::oldest_running(LedgerEntry& out) const {
  std::lock_guard lock(mutex_);
  bool found = false;
  for (const LedgerEntry& e : ring_)
    if (e.finished_ns == 0 && (!found || e.seq < out.seq)) {
      out = e;
      found = true;
    }
  return found;
}

uint64_t CollectiveLedger::last_seq() const {
  std::lock_guard lock(mutex_);
  return next_seq_ - 1;
}

namespace {
std::mutex g_registry_mutex;
std::vector<std::weak_ptr<CollectiveLedger>>& registry() {
  static auto* ledgers = new std::vector<std::weak_ptr<CollectiveLedger>>();  // never destroyed: used at exit
  return *ledgers;
}
std::deque<std::shared_ptr<CollectiveLedger>>& retired() {
  static auto* ledgers = new std::deque<std::shared_ptr<CollectiveLedger>>();  // never destroyed: used at exit
  return *ledgers;
}
std::atomic<bool> g_checks{false};
}  // namespace

std::shared_ptr<CollectiveLedger> make_ledger(std::string name) {
  auto ledger = std::make_shared<CollectiveLedger>(std::move(name));
  std::lock_guard lock(g_registry_mutex);
  auto& all = registry();
  std::erase_if(all, [](const std::weak_ptr<CollectiveLedger>& w) { return w.expired(); });
  all.push_back(ledger);
  return ledger;
}

std::vector<std::shared_ptr<const CollectiveLedger>> live_ledgers() {
  std::lock_guard lock(g_registry_mutex);
  std::vector<std::shared_ptr<const CollectiveLedger>> out;
  for (const auto& weak : registry())
    if (auto ledger = weak.lock()) out.push_back(ledger);
  return out;
}

void retire_ledger(std::shared_ptr<CollectiveLedger> ledger) {
  std::lock_guard lock(g_registry_mutex);
  retired().push_back(std::move(ledger));
  if (retired().size() > 64) retired().pop_front();
}

std::vector<std::shared_ptr<const CollectiveLedger>> retired_ledgers() {
  std::lock_guard lock(g_registry_mutex);
  return {retired().begin(), retired().end()};
}

void set_collective_checks(bool on) { g_checks = on; }
bool collective_checks() { return g_checks; }

}  // namespace accel
