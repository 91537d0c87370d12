// ProgressBar: the arithmetic (rate from the steps since the start, ETA from the rate) and the two
// ways of printing it.
#include "runtime/progress_bar.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "kernels/error.h"

namespace accel {

namespace {

bool is_terminal(const std::ostream* out) {
  if (out == &std::cout) return isatty(fileno(stdout)) != 0;
  if (out == &std::cerr) return isatty(fileno(stderr)) != 0;
  return false;
}

std::string short_number(double value) { return fmt::format("{:.4g}", value); }

}  // namespace

std::string format_duration(double seconds) {
  const auto total = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  const int64_t h = total / 3600, m = total / 60 % 60, s = total % 60;
  return h > 0 ? fmt::format("{}:{:02d}:{:02d}", h, m, s) : fmt::format("{}:{:02d}", m, s);
}

ProgressBar::ProgressBar(int64_t total, ProgressBarOptions options, int64_t start)
    : total_(total), options_(std::move(options)), start_count_(start), count_(start) {
  if (total < 0 || start < 0 || (total > 0 && start > total))
    throw Error(fmt::format("ProgressBar: total {} and start {} must be >= 0, with start <= total", total, start));
  if (options_.print_every_steps < 0 || options_.print_every_seconds < 0 || options_.redraw_every_seconds < 0)
    throw Error(fmt::format("ProgressBar: print_every_steps {}, print_every_seconds {} and redraw_every_seconds {} "
                            "must be >= 0",
                            options_.print_every_steps, options_.print_every_seconds, options_.redraw_every_seconds));
  out_ = options_.out ? options_.out : &std::cout;
  terminal_ = options_.terminal.value_or(is_terminal(out_));
  start_time_ = last_print_time_ = now();
  last_print_count_ = start;
}

ProgressBar::~ProgressBar() { close(); }

double ProgressBar::now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void ProgressBar::set(const std::string& name, double value) {
  for (auto& [known, v] : values_)
    if (known == name) {
      v = value;
      return;
    }
  values_.emplace_back(name, value);
}

double ProgressBar::rate() const {
  const double elapsed = now() - start_time_;
  return elapsed > 0 ? static_cast<double>(count_ - start_count_) / elapsed : 0.0;
}

std::optional<double> ProgressBar::eta_seconds() const {
  const double r = rate();
  if (total_ == 0 || r <= 0) return std::nullopt;
  return static_cast<double>(std::max<int64_t>(total_ - count_, 0)) / r;
}

std::string ProgressBar::line() const {
  std::string text = options_.description.empty() ? "" : options_.description + "  ";
  if (total_ > 0) {
    const int width = static_cast<int>(std::to_string(total_).size());
    text += fmt::format("{:>{}}/{} {:3d}%", count_, width, total_, static_cast<int>(100 * count_ / total_));
  } else {
    text += fmt::format("{}", count_);
  }
  const double r = rate();
  // Slow steps read better as seconds per step.
  text += r <= 0 ? " | - step/s" : r >= 1 ? fmt::format(" | {:.1f} step/s", r) : fmt::format(" | {:.2f} s/step", 1 / r);
  if (const std::optional<double> eta = eta_seconds()) text += " | ETA " + format_duration(*eta);
  if (!values_.empty()) {
    text += " |";
    for (const auto& [name, value] : values_) text += fmt::format(" {}={}", name, short_number(value));
  }
  return text;
}

void ProgressBar::update(int64_t steps) {
  if (steps < 0) throw Error(fmt::format("ProgressBar::update: steps {} is negative", steps));
  if (closed_) return;
  count_ += steps;
  if (!options_.enabled) return;
  const double t = now();
  const bool last = total_ > 0 && count_ >= total_;
  bool due;
  if (terminal_) {
    due = last || t - last_print_time_ >= options_.redraw_every_seconds;
  } else {
    due = (options_.print_every_steps > 0 && count_ - last_print_count_ >= options_.print_every_steps) ||
          (options_.print_every_seconds > 0 && t - last_print_time_ >= options_.print_every_seconds);
  }
  if (due) print_line(false);
}

void ProgressBar::print_line(bool final) {
  const std::string text = line();
  if (terminal_) {
    // Spaces over what a longer previous line left on the terminal.
    const size_t pad = last_width_ > text.size() ? last_width_ - text.size() : 0;
    *out_ << '\r' << text << std::string(pad, ' ') << (final ? "\n" : "") << std::flush;
    last_width_ = final ? 0 : text.size();  // after the newline the next line starts empty
  } else {
    *out_ << text << '\n' << std::flush;
  }
  last_print_time_ = now();
  last_print_count_ = count_;
}

void ProgressBar::write(const std::string& text) {
  if (!options_.enabled) return;
  if (!terminal_) {
    *out_ << text << '\n' << std::flush;
    return;
  }
  const bool drawn = last_width_ > 0 && !closed_;  // the bar is on the current line
  const size_t pad = last_width_ > text.size() ? last_width_ - text.size() : 0;
  *out_ << (drawn ? "\r" : "") << text << std::string(pad, ' ') << '\n';
  last_width_ = 0;  // a fresh line below
  if (drawn) print_line(false);
  *out_ << std::flush;
}

void ProgressBar::close() {
  if (closed_) return;
  closed_ = true;
  if (!options_.enabled) return;
  // A line at the end unless the last one said the same count; a terminal's drawn line gets its newline.
  if (last_print_count_ != count_ || (terminal_ && last_width_ > 0)) print_line(true);
}

}  // namespace accel
