// RankState from the ledgers, to and from JSON, and the stall report that groups the ranks.
#include "runtime/faults/rank_state.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "kernels/error.h"
#include "runtime/process_state.h"

namespace accel {
namespace {

nlohmann::json entry_json(const LedgerEntry& e) {
  return {{"seq", e.seq}, {"op", e.op}, {"dtype", dtype_name(e.dtype)}, {"count", e.count}, {"root", e.root},
          {"site", e.site}, {"entered_ns", e.entered_ns}, {"finished_ns", e.finished_ns}};
}

LedgerEntry entry_from(const nlohmann::json& j) {
  LedgerEntry e;
  e.seq = j.at("seq").get<uint64_t>();
  e.op = j.at("op").get<std::string>();
  e.count = j.at("count").get<int64_t>();
  e.root = j.at("root").get<int>();
  e.site = j.at("site").get<std::string>();
  e.entered_ns = j.at("entered_ns").get<int64_t>();
  e.finished_ns = j.at("finished_ns").get<int64_t>();
  return e;
}

std::string ranks_text(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ","));
}

// What rank r is doing about collective `stalled` on `comm`: a sentence's predicate in the singular.
std::string activity_of(const RankState& r, const std::string& comm, const LedgerEntry& stalled) {
  const CommunicatorState* c = r.find(comm);
  if (c == nullptr) return "";  // not a member of that communicator
  if (c->running && c->running->seq == stalled.seq)
    return fmt::format("waits in {} #{} ({})", c->running->op, stalled.seq, c->running->site);
  if (c->running) return fmt::format("waits in {} #{} ({})", c->running->op, c->running->seq, c->running->site);
  if (c->last_seq >= stalled.seq) return fmt::format("is past #{}: it finished it", stalled.seq);
  std::string text = fmt::format("never entered {} #{}", stalled.op, stalled.seq);
  if (c->last_finished)
    text += fmt::format("; its last collective was #{} {} at {}", c->last_finished->seq, c->last_finished->op,
                        c->last_finished->site);
  for (const CommunicatorState& other : r.communicators)
    if (other.running)
      return text + fmt::format(", and it waits in {} #{} ({}) on communicator {}", other.running->op,
                                other.running->seq, other.running->site, other.name);
  return text + (r.activity == "exiting" ? ", and it is exiting (exit, or a return from main)"
                                         : ", and it runs other code (no collective)");
}

}  // namespace

const CommunicatorState* RankState::find(const std::string& name) const {
  for (const CommunicatorState& c : communicators)
    if (c.name == name) return &c;
  return nullptr;
}

nlohmann::json RankState::to_json() const {
  nlohmann::json comms = nlohmann::json::array();
  for (const CommunicatorState& c : communicators) {
    nlohmann::json j{{"name", c.name}, {"last_seq", c.last_seq}};
    if (c.running) j["running"] = entry_json(*c.running);
    if (c.last_finished) j["last_finished"] = entry_json(*c.last_finished);
    comms.push_back(j);
  }
  return {{"rank", rank}, {"host", host}, {"pid", pid}, {"activity", activity}, {"communicators", comms}};
}

RankState RankState::from_json(const nlohmann::json& j) {
  try {
    RankState r;
    r.rank = j.at("rank").get<int>();
    r.host = j.at("host").get<std::string>();
    r.pid = j.at("pid").get<int>();
    r.activity = j.at("activity").get<std::string>();
    for (const nlohmann::json& c : j.at("communicators")) {
      CommunicatorState s{c.at("name").get<std::string>(), c.at("last_seq").get<uint64_t>(), {}, {}};
      if (c.contains("running")) s.running = entry_from(c.at("running"));
      if (c.contains("last_finished")) s.last_finished = entry_from(c.at("last_finished"));
      r.communicators.push_back(s);
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("RankState::from_json: not a rank's state: {}", e.what()));
  }
}

RankState capture_rank_state(int rank, const std::string& activity) {
  RankState r{rank, host_name(), static_cast<int>(getpid()), activity, {}};
  std::vector<std::shared_ptr<const CollectiveLedger>> ledgers = live_ledgers();
  if (activity == "exiting") {
    // The newest retired ledger of each name: its communicator's last collectives.
    const std::vector<std::shared_ptr<const CollectiveLedger>> retired = retired_ledgers();
    for (auto it = retired.rbegin(); it != retired.rend(); ++it)
      if (std::none_of(ledgers.begin(), ledgers.end(), [&](const auto& l) { return l->name() == (*it)->name(); }))
        ledgers.push_back(*it);
  }
  for (const auto& ledger : ledgers) {
    CommunicatorState c{ledger->name(), ledger->last_seq(), {}, {}};
    for (const LedgerEntry& e : ledger->entries()) {
      if (e.finished_ns == 0 && !c.running) c.running = e;
      if (e.finished_ns != 0) c.last_finished = e;
    }
    if (c.last_seq > 0) r.communicators.push_back(std::move(c));
  }
  return r;
}

std::string stall_report(int reporter, const std::string& comm, const LedgerEntry& stalled, double waited_s,
                         const std::vector<std::optional<RankState>>& ranks) {
  std::string report = fmt::format(
      "accel: a collective stalled: rank {} has waited {:.1f} s in {} #{} ({}) on communicator {}\n", reporter,
      waited_s, stalled.op, stalled.seq, stalled.site, comm);
  // Ranks doing the same thing share a line, in the order of their lowest rank.
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  std::vector<int> silent;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (!ranks[r]) {
      silent.push_back(static_cast<int>(r));
      continue;
    }
    const std::string what = activity_of(*ranks[r], comm, stalled);
    if (what.empty()) continue;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == what; });
    if (it == groups.end()) groups.push_back({what, {static_cast<int>(r)}});
    else it->second.push_back(static_cast<int>(r));
  }
  for (const auto& [what, members] : groups) {
    std::string predicate = what;
    if (members.size() > 1 && predicate.rfind("waits ", 0) == 0) predicate = "wait " + predicate.substr(6);
    if (members.size() > 1 && predicate.rfind("is ", 0) == 0) predicate = "are " + predicate.substr(3);
    report += fmt::format("  {} {}\n", ranks_text(members), predicate);
  }
  if (!silent.empty())
    report += fmt::format("  {} sent no report (gone, or on another machine without a shared run directory)\n",
                          ranks_text(silent));
  return report;
}

}  // namespace accel
