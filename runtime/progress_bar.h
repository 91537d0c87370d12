// ProgressBar: a training loop's progress on the main process: step/total, percent, rate (steps/s),
// ETA and the values the loop sets (loss, lr, ...). On a terminal it redraws one line with \r; into
// a file or a pipe it prints a plain line every few steps or seconds. Disabled, it prints nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace accel {

struct ProgressBarOptions {
  std::string description;  // a word in front, such as "train"
  // Where it prints (null: std::cout), and whether that is a terminal (unset: isatty, for std::cout
  // and std::cerr; otherwise not a terminal).
  std::ostream* out = nullptr;
  std::optional<bool> terminal{};
  // Not a terminal: a line every print_every_steps steps (0: never by count) or when
  // print_every_seconds have passed since the last line (0: never by time), and one at the end.
  int64_t print_every_steps = 0;
  double print_every_seconds = 10;
  // A terminal: redraw at most this often (the last step is always drawn).
  double redraw_every_seconds = 0.1;
  bool enabled = true;  // false: prints nothing (Accelerator::progress_bar sets it off the main process)
  // Seconds from any fixed origin; unset: std::chrono::steady_clock. Tests pass a fake clock.
  std::function<double()> clock{};
};

class ProgressBar {
 public:
  // total: the steps the loop will take (0: unknown, then no percent and no ETA); start: steps
  // already done (a resumed run), which do not count towards the rate.
  explicit ProgressBar(int64_t total, ProgressBarOptions options = {}, int64_t start = 0);
  ~ProgressBar();
  // Not copied or moved (it has printed for its place); Accelerator::progress_bar returns it in place.
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Shows name=value after the counts, until set again (in the order first set).
  void set(const std::string& name, double value);
  // steps more are done; draws or prints a line when it is time.
  void update(int64_t steps = 1);
  // Prints text as a line of its own above the bar (tqdm.write): on a terminal the bar's line is
  // overwritten and drawn again below. Prints nothing where the bar prints nothing (disabled).
  void write(const std::string& text);
  // The last line (and a newline on a terminal), unless the bar took no step since its last line. The
  // destructor calls it; later updates print nothing.
  void close();

  int64_t count() const { return count_; }
  // Steps per second since the start (0 before any step or time).
  double rate() const;
  // Seconds left at the current rate; nullopt with total 0 or before the rate is known.
  std::optional<double> eta_seconds() const;
  // The line as it would be printed now, such as
  //   "train  120/600  20% | 35.2 step/s | ETA 0:13 | loss=1.2345 lr=0.001"
  std::string line() const;

 private:
  double now() const;
  void print_line(bool final);
  int64_t total_;
  ProgressBarOptions options_;
  std::ostream* out_;
  bool terminal_;
  int64_t start_count_, count_;
  double start_time_, last_print_time_;
  int64_t last_print_count_;
  size_t last_width_ = 0;  // of the line on the terminal, to blank what a shorter one leaves
  std::vector<std::pair<std::string, double>> values_;
  bool closed_ = false;
};

// "0:07", "3:25", "1:02:03".
std::string format_duration(double seconds);

}  // namespace accel
