// Straggler summary: steps are the intervals that optimizer-step spans end; in each, the time from
// the first forward to the first gradient collective's call.
#include "runtime/timeline/straggler_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace accel {

namespace {

struct Times {
  std::vector<double> forward_begins, gradient_begins, step_ends;  // microseconds
};

Times times_of(const nlohmann::json& events) {
  Times t;
  for (const nlohmann::json& e : events) {
    const std::string ph = e.value("ph", "");
    const std::string name = e.value("name", "");
    const double ts = e.value("ts", 0.0);
    if (ph == "X" && name == "forward") t.forward_begins.push_back(ts);
    if (ph == "X" && name == "optimizer step") t.step_ends.push_back(ts + e.value("dur", 0.0));
    if (ph == "b" && e.value("cat", "") == "gradient") t.gradient_begins.push_back(ts);
  }
  for (auto* v : {&t.forward_begins, &t.gradient_begins, &t.step_ends}) std::sort(v->begin(), v->end());
  return t;
}

// The first value of sorted v in [from, to), or NaN.
double first_in(const std::vector<double>& v, double from, double to) {
  const auto it = std::lower_bound(v.begin(), v.end(), from);
  return it != v.end() && *it < to ? *it : std::numeric_limits<double>::quiet_NaN();
}

std::vector<double> compute_per_step_ms(const Times& t) {
  std::vector<double> out;
  double window_begin = -std::numeric_limits<double>::infinity();
  for (const double end : t.step_ends) {
    const double forward = first_in(t.forward_begins, window_begin, end);
    const double gradient = forward == forward ? first_in(t.gradient_begins, forward, end) : forward;
    if (gradient == gradient) out.push_back((gradient - forward) / 1000.0);
    window_begin = end;
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

}  // namespace

StragglerSummary straggler_summary(const std::vector<RankTrace>& traces) {
  StragglerSummary s;
  for (const RankTrace& trace : traces) {
    const std::vector<double> ms = compute_per_step_ms(times_of(trace.events));
    if (ms.empty()) continue;
    s.ranks.push_back({trace.rank, trace.host, static_cast<int>(ms.size()), median(ms),
                       *std::min_element(ms.begin(), ms.end()), *std::max_element(ms.begin(), ms.end())});
  }
  for (size_t i = 0; i < s.ranks.size(); ++i)
    if (s.slowest < 0 || s.ranks[i].median_ms > s.ranks[static_cast<size_t>(s.slowest)].median_ms)
      s.slowest = static_cast<int>(i);
  return s;
}

std::string StragglerSummary::text() const {
  if (slowest < 0)
    return "straggler summary: no optimizer step sent a gradient collective (one process, or no prepared "
           "model and optimizer), so there is nothing to compare\n";
  std::string out = "straggler summary: compute before each step's first gradient collective, in ms\n";
  out += fmt::format("  {:>5}  {:<20}  {:>5}  {:>9}  {:>9}  {:>9}\n", "rank", "host", "steps", "median", "min", "max");
  size_t fastest = 0;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankCompute& r = ranks[i];
    out += fmt::format("  {:>5}  {:<20}  {:>5}  {:>9.3f}  {:>9.3f}  {:>9.3f}\n", r.rank, r.host, r.steps, r.median_ms,
                       r.min_ms, r.max_ms);
    if (r.median_ms < ranks[fastest].median_ms) fastest = i;
  }
  const RankCompute& slow = ranks[static_cast<size_t>(slowest)];
  const RankCompute& fast = ranks[fastest];
  const double behind = fast.median_ms > 0 ? 100.0 * (slow.median_ms / fast.median_ms - 1.0) : 0.0;
  out += fmt::format("slowest: rank {} ({}), {:.3f} ms median, {:.0f} % above the fastest, rank {}\n", slow.rank,
                     slow.host, slow.median_ms, behind, fast.rank);
  return out;
}

}  // namespace accel
