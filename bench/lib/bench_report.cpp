// The table, footer and JSON of a collective sweep.
#include "bench/lib/bench_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <ostream>

namespace accel::bench {

namespace {

constexpr int kGroupWidth = 34;  // one column group: time, algbw, busbw, #wrong

const char* redop_name(const BenchRow& row) { return row.reduces ? reduce_op_name(row.op) : "none"; }

std::string factor_text(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_reduce: return "2(n-1)/n";
    case CollectiveKind::all_gather:
    case CollectiveKind::reduce_scatter: return "(n-1)/n";
    case CollectiveKind::broadcast: return "1";
  }
  return "?";
}

bool rooted(const BenchReport& report) { return report.kind == CollectiveKind::broadcast; }

int column_index(const BenchReport& report, const std::string& backend) {
  for (size_t i = 0; i < report.columns.size(); ++i)
    if (report.columns[i].backend == backend) return static_cast<int>(i);
  return -1;
}

}  // namespace

std::vector<ColumnSummary> summarize(const BenchReport& report) {
  std::vector<ColumnSummary> summaries;
  for (size_t c = 0; c < report.columns.size(); ++c) {
    ColumnSummary s;
    s.backend = report.columns[c].backend;
    const int base = column_index(report, report.columns[c].baseline);
    s.has_ratio = base >= 0;
    double busbw_sum = 0, ratio_sum = 0, large_sum = 0;
    int ratio_rows = 0;
    s.min_ratio_large = 0;
    for (const BenchRow& row : report.rows) {
      const Measurement& m = row.results.at(c);
      busbw_sum += m.busbw_gbs;
      s.wrong += m.wrong;
      if (!s.has_ratio) continue;
      const double reference = row.results.at(static_cast<size_t>(base)).busbw_gbs;
      if (reference <= 0) continue;  // a time too short to resolve; no ratio for this row
      const double ratio = m.busbw_gbs / reference;
      ratio_sum += ratio;
      ++ratio_rows;
      if (row.bytes >= kLargeBytes) {
        s.min_ratio_large = s.large_rows == 0 ? ratio : std::min(s.min_ratio_large, ratio);
        large_sum += ratio;
        ++s.large_rows;
      }
    }
    if (!report.rows.empty()) s.avg_busbw_gbs = busbw_sum / static_cast<double>(report.rows.size());
    if (ratio_rows > 0) s.ratio = ratio_sum / ratio_rows;
    if (s.large_rows > 0) s.ratio_large = large_sum / s.large_rows;
    summaries.push_back(s);
  }
  return summaries;
}

void print_header(std::ostream& out, const BenchReport& report) {
  out << fmt::format("# accel bench {}: {} ranks (launcher: {}), warmup {}, iters {}\n",
                     collective_command(report.kind), report.ranks, report.launcher, report.warmup, report.iters);
  for (const Column& c : report.columns) out << fmt::format("#   {:8} {}\n", c.backend, c.call);
  out << fmt::format("# time: max over ranks of the median time per call (us); algbw = size / time (GB/s, 1e9 B/s);\n"
                     "# busbw = algbw * {} = algbw * {:.3f}; #wrong: elements differing from the exact result, all "
                     "ranks\n#\n",
                     factor_text(report.kind), bus_bandwidth_factor(report.kind, report.ranks));
  // Three header lines over the row columns (see print_row for the widths).
  const auto lead = [&](const char* size, const char* count, const char* type, const char* redop, const char* root,
                        const char* place) {
    return fmt::format("# {:>10} {:>12} {:>5} {:>6}{} {:>5}", size, count, type, redop,
                       rooted(report) ? fmt::format(" {:>4}", root) : "", place);
  };
  std::string names = lead("", "", "", "", "", ""), labels = lead("size", "count", "type", "redop", "root", "place"),
              units = lead("(B)", "(elements)", "", "", "", "");
  for (const Column& c : report.columns) {
    names += fmt::format(" {:>{}}", c.backend, kGroupWidth - 1);
    labels += fmt::format(" {:>10} {:>7} {:>7} {:>6}", "time", "algbw", "busbw", "#wrong");
    units += fmt::format(" {:>10} {:>7} {:>7} {:>6}", "(us)", "(GB/s)", "(GB/s)", "");
  }
  out << names << "\n" << labels << "\n" << units << "\n";
}

void print_row(std::ostream& out, const BenchReport& report, const BenchRow& row) {
  std::string line = fmt::format("  {:>10} {:>12} {:>5} {:>6}{} {:>5}", row.bytes, row.count, dtype_name(row.dtype),
                                 redop_name(row), rooted(report) ? fmt::format(" {:>4}", row.root) : "",
                                 row.in_place ? "in" : "out");
  for (const Measurement& m : row.results)
    line += fmt::format(" {:>10.2f} {:>7.2f} {:>7.2f} {:>6}", m.time_us, m.algbw_gbs, m.busbw_gbs, m.wrong);
  out << line << "\n" << std::flush;
}

void print_footer(std::ostream& out, const BenchReport& report) {
  const std::vector<ColumnSummary> summaries = summarize(report);
  std::string avg = "# Avg bus bandwidth (GB/s):";
  int64_t wrong = 0;
  for (const ColumnSummary& s : summaries) {
    avg += fmt::format("  {} {:.3f}", s.backend, s.avg_busbw_gbs);
    wrong += s.wrong;
  }
  out << avg << "\n";
  for (size_t c = 0; c < summaries.size(); ++c) {
    const ColumnSummary& s = summaries[c];
    if (!s.has_ratio) continue;
    std::string line = fmt::format("# busbw ratio {} / {} (mean of per-row ratios): all sizes {:.3f}", s.backend,
                                   report.columns[c].baseline, s.ratio);
    if (s.large_rows > 0)
      line += fmt::format(", sizes >= 1 MB {:.3f} (min {:.3f}, {} rows)", s.ratio_large, s.min_ratio_large,
                          s.large_rows);
    else
      line += ", no sizes >= 1 MB";
    out << line << "\n";
  }
  out << fmt::format("# #wrong in total: {} {}\n", wrong, wrong == 0 ? "OK" : "FAILED") << std::flush;
}

nlohmann::json to_json(const BenchReport& report) {
  using nlohmann::json;
  json columns = json::array();
  for (const Column& c : report.columns)
    columns.push_back({{"backend", c.backend}, {"baseline", c.baseline.empty() ? json(nullptr) : json(c.baseline)},
                       {"call", c.call}});
  json rows = json::array();
  for (const BenchRow& row : report.rows) {
    json results = json::object();
    for (size_t c = 0; c < report.columns.size(); ++c) {
      const Measurement& m = row.results.at(c);
      results[report.columns[c].backend] = {{"time_us", m.time_us}, {"algbw_gbs", m.algbw_gbs},
                                            {"busbw_gbs", m.busbw_gbs}, {"wrong", m.wrong}};
    }
    rows.push_back({{"size_bytes", row.bytes}, {"count", row.count}, {"dtype", dtype_name(row.dtype)},
                    {"redop", redop_name(row)}, {"root", row.root}, {"in_place", row.in_place},
                    {"results", results}});
  }
  json summary = json::array();
  for (const ColumnSummary& s : summarize(report)) {
    json entry = {{"backend", s.backend}, {"avg_busbw_gbs", s.avg_busbw_gbs}, {"wrong", s.wrong}};
    if (s.has_ratio) {
      entry["ratio"] = s.ratio;
      entry["large_rows"] = s.large_rows;
      entry["ratio_large"] = s.large_rows > 0 ? json(s.ratio_large) : json(nullptr);
      entry["min_ratio_large"] = s.large_rows > 0 ? json(s.min_ratio_large) : json(nullptr);
    }
    summary.push_back(entry);
  }
  return {{"benchmark", collective_command(report.kind)},
          {"ranks", report.ranks},
          {"launcher", report.launcher},
          {"warmup", report.warmup},
          {"iters", report.iters},
          {"time", "max over ranks of the median time per call"},
          {"busbw_factor", bus_bandwidth_factor(report.kind, report.ranks)},
          {"large_bytes", kLargeBytes},
          {"columns", columns},
          {"rows", rows},
          {"summary", summary}};
}

}  // namespace accel::bench
