// The SVG: the step's window is taken from rank 0 (from the end of the step before to the end of this
// one), and every rank is drawn in it, so a late rank shows as a shift. Nested spans go one lane down;
// collectives that overlap each other are stacked in lanes of their own.
#include "runtime/timeline/timeline_picture.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "kernels/error.h"

namespace accel {

namespace {

struct Bar {
  double begin_us, end_us;
  std::string name, category;
  int lane = 0;
};

struct Row {
  std::string label;
  std::vector<Bar> bars;
  int lanes = 1;
};

const char* color_of(const Bar& b) {
  if (b.name == "forward") return "#4e79a7";
  if (b.name == "backward") return "#f28e2b";
  if (b.name == "optimizer step") return "#59a14f";
  if (b.category == "data") return "#bab0ac";
  if (b.category == "checkpoint") return "#9c755f";
  if (b.category == "gradient") return "#e15759";
  if (b.category == "collective") return "#b07aa1";
  return "#76b7b2";
}

std::string escaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

struct Window {
  double from, to;  // microseconds
  int step;
};

// Rank 0's step window.
Window step_window(const RankTrace& rank0, int step) {
  std::vector<double> ends;
  double first = INFINITY;
  for (const nlohmann::json& e : rank0.events) {
    if (!e.contains("ts")) continue;
    first = std::min(first, e.value("ts", 0.0));
    if (e.value("ph", "") == "X" && e.value("name", "") == "optimizer step")
      ends.push_back(e.value("ts", 0.0) + e.value("dur", 0.0));
  }
  std::sort(ends.begin(), ends.end());
  const int n = static_cast<int>(ends.size());
  const int k = step < 0 ? n - 1 : step;
  if (k < 0 || k >= n)
    throw Error(fmt::format("timeline_svg: rank 0 took {} optimizer steps; step {} is not among them", n, step));
  return {k > 0 ? ends[static_cast<size_t>(k - 1)] : first, ends[static_cast<size_t>(k)], k};
}

// Lanes by nesting (spans of one thread) or by overlap (collectives): each bar goes to the first lane
// whose last bar has ended.
int assign_lanes(std::vector<Bar>& bars) {
  std::sort(bars.begin(), bars.end(), [](const Bar& a, const Bar& b) {
    return a.begin_us != b.begin_us ? a.begin_us < b.begin_us : a.end_us > b.end_us;
  });
  std::vector<double> lane_end;
  for (Bar& b : bars) {
    size_t lane = 0;
    while (lane < lane_end.size() && lane_end[lane] > b.begin_us) ++lane;
    if (lane == lane_end.size()) lane_end.push_back(0);
    lane_end[lane] = b.end_us;
    b.lane = static_cast<int>(lane);
  }
  return std::max<int>(1, static_cast<int>(lane_end.size()));
}

std::vector<Row> rows_of(const RankTrace& t, double from, double to) {
  std::map<int, std::string> thread_names;
  std::map<int, Row> threads;
  Row collectives{fmt::format("rank {} collectives", t.rank), {}, 1};
  std::map<std::string, double> open;  // async id -> begin
  std::map<std::string, const nlohmann::json*> open_event;
  for (const nlohmann::json& e : t.events) {
    const std::string ph = e.value("ph", "");
    if (ph == "M" && e.value("name", "") == "thread_name") thread_names[e.value("tid", 0)] = e["args"].value("name", "");
    const double ts = e.value("ts", 0.0);
    if (ph == "X" && ts < to && ts + e.value("dur", 0.0) > from)
      threads[e.value("tid", 0)].bars.push_back({ts, ts + e.value("dur", 0.0), e.value("name", ""), e.value("cat", "")});
    const std::string id = ph == "b" || ph == "e" ? e["id2"].value("local", "") : "";
    if (ph == "b") open[id] = ts, open_event[id] = &e;
    if (ph == "e" && open.count(id) && open[id] < to && ts > from) {
      const nlohmann::json& b = *open_event[id];
      collectives.bars.push_back({open[id], ts, b.value("name", ""), b.value("cat", "")});
    }
  }
  std::vector<Row> rows;
  for (auto& [tid, row] : threads) {
    row.label = fmt::format("rank {} {}", t.rank, thread_names.count(tid) ? thread_names[tid] : fmt::format("thread {}", tid));
    row.lanes = assign_lanes(row.bars);
    rows.push_back(std::move(row));
  }
  collectives.lanes = assign_lanes(collectives.bars);
  rows.push_back(std::move(collectives));
  return rows;
}

double nice_tick(double span_ms) {
  const double raw = span_ms / 8;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

}  // namespace

std::string timeline_svg(const std::vector<RankTrace>& traces, const TimelinePictureOptions& options) {
  if (traces.empty() || traces[0].rank != 0) throw Error("timeline_svg: rank 0's timeline is needed for the step window");
  const Window window = step_window(traces[0], options.step);
  // A margin on each side, so that the bars at the window's edges (another rank's, a little late) show.
  const double margin = 0.03 * (window.to - window.from);
  const double from = window.from - margin, to = window.to + margin;
  const int step = window.step;
  std::vector<Row> rows;
  for (const RankTrace& t : traces)
    for (Row& r : rows_of(t, from, to)) rows.push_back(std::move(r));
  constexpr int kLabel = 190, kLane = 18, kGap = 8, kTop = 30;
  const double plot = options.width_px - kLabel - 20;
  const auto x_of = [&](double us) { return kLabel + plot * (std::clamp(us, from, to) - from) / (to - from); };
  int height = kTop;
  for (const Row& r : rows) height += r.lanes * kLane + kGap;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      options.width_px, height + 20);
  // Time 0 is where rank 0's step begins.
  const double span_ms = (window.to - window.from) / 1000.0, tick = nice_tick(span_ms);
  for (double t = 0; t <= span_ms + 1e-9; t += tick) {
    const double x = x_of(window.from + t * 1000.0);
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>"
                       "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:g} ms</text>\n",
                       x, kTop - 6, height, kTop - 12, t);
  }
  int y = kTop;
  for (const Row& r : rows) {
    svg += fmt::format("<text x=\"4\" y=\"{}\">{}</text>\n", y + 13, escaped(r.label));
    for (const Bar& b : r.bars) {
      const double x0 = x_of(b.begin_us), x1 = std::max(x_of(b.end_us), x0 + 1.0);
      const int by = y + b.lane * kLane;
      svg += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"><title>{} "
                         "({:.3f} ms)</title></rect>\n",
                         x0, by + 1, x1 - x0, kLane - 2, color_of(b), escaped(b.name), (b.end_us - b.begin_us) / 1000.0);
      const size_t fits = static_cast<size_t>((x1 - x0) / 6.5);
      if (fits >= 4)
        svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" fill=\"white\">{}</text>\n", x0 + 3, by + 13,
                           escaped(b.name.substr(0, fits)));
    }
    y += r.lanes * kLane + kGap;
  }
  svg += fmt::format("<text x=\"4\" y=\"{}\" fill=\"#555\">optimizer step {} of rank 0, {:.3f} ms; "
                     "collectives run from their call to their end</text>\n</svg>\n",
                     height + 14, step, span_ms);
  return svg;
}

}  // namespace accel
