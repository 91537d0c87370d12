// The progress bar with a fake clock: rate and ETA arithmetic, the one redrawn line on a terminal,
// the plain periodic lines elsewhere, and silence when disabled (what the Accelerator does off the
// main process; tests/tracking/test_trackers_mpi.cpp checks that under mpirun).
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>

#include "accel.h"

using namespace accel;

namespace {

// A clock the test moves by hand.
struct FakeClock {
  double seconds = 100;
  std::function<double()> function() {
    return [this] { return seconds; };
  }
};

ProgressBarOptions options_for(std::ostream& out, FakeClock& clock, bool terminal) {
  ProgressBarOptions o;
  o.out = &out;
  o.terminal = terminal;
  o.clock = clock.function();
  return o;
}

}  // namespace

TEST_CASE("rate is steps over elapsed seconds; ETA is the steps left over the rate") {
  std::ostringstream out;
  FakeClock clock;
  ProgressBarOptions o = options_for(out, clock, false);
  o.enabled = false;
  ProgressBar bar(100, o);
  CHECK(bar.rate() == 0);
  CHECK_FALSE(bar.eta_seconds().has_value());
  clock.seconds += 5;
  bar.update(10);
  CHECK(bar.count() == 10);
  CHECK(bar.rate() == doctest::Approx(2.0));            // 10 steps in 5 s
  CHECK(*bar.eta_seconds() == doctest::Approx(45.0));   // 90 steps left at 2 steps/s
  clock.seconds += 5;
  bar.update(30);
  CHECK(bar.rate() == doctest::Approx(4.0));            // 40 in 10 s
  CHECK(*bar.eta_seconds() == doctest::Approx(15.0));   // 60 left
  bar.set("loss", 1.23456);
  bar.set("lr", 0.001);
  bar.set("loss", 0.5);  // set again: same place, new value
  CHECK(bar.line() == " 40/100  40% | 4.0 step/s | ETA 0:15 | loss=0.5 lr=0.001");
  CHECK(out.str().empty());  // disabled: nothing printed, arithmetic the same

  // A resumed run: the steps done before do not count towards the rate.
  ProgressBar resumed(100, o, 50);
  clock.seconds += 10;
  resumed.update(5);
  CHECK(resumed.rate() == doctest::Approx(0.5));
  CHECK(*resumed.eta_seconds() == doctest::Approx(90.0));
  CHECK(resumed.line() == " 55/100  55% | 2.00 s/step | ETA 1:30");

  ProgressBar unknown(0, o);  // no total: no percent, no ETA
  clock.seconds += 1;
  unknown.update(3);
  CHECK(unknown.line() == "3 | 3.0 step/s");
  CHECK_FALSE(unknown.eta_seconds().has_value());
}

TEST_CASE("durations read as m:ss or h:mm:ss") {
  CHECK(format_duration(7) == "0:07");
  CHECK(format_duration(205) == "3:25");
  CHECK(format_duration(3723) == "1:02:03");
  CHECK(format_duration(-3) == "0:00");
}

TEST_CASE("on a terminal the bar redraws one line with \\r, at most every redraw_every_seconds, and ends it") {
  std::ostringstream out;
  FakeClock clock;
  ProgressBarOptions o = options_for(out, clock, true);
  o.description = "train";
  o.redraw_every_seconds = 1;
  {
    ProgressBar bar(4, o);
    clock.seconds += 0.5;
    bar.update();  // too soon: not drawn
    CHECK(out.str().empty());
    clock.seconds += 0.5;
    bar.set("loss", 2.25);
    bar.update();
    CHECK(out.str() == "\rtrain  2/4  50% | 2.0 step/s | ETA 0:01 | loss=2.25");
    clock.seconds += 1;
    bar.set("loss", 0.5);
    bar.update(2);  // the last step is always drawn
  }
  // The shorter line is padded with spaces over the longer one, and the bar ends with a newline.
  const std::string first = "train  2/4  50% | 2.0 step/s | ETA 0:01 | loss=2.25";
  const std::string second = "train  4/4 100% | 2.0 step/s | ETA 0:00 | loss=0.5";
  CHECK(out.str() == "\r" + first + "\r" + second + " " + "\r" + second + "\n");
  CHECK(out.str().find('\n') == out.str().size() - 1);  // one line on the terminal
}

TEST_CASE("into a file or pipe it prints plain lines every N steps or every T seconds, and one at the end") {
  std::ostringstream out;
  FakeClock clock;
  ProgressBarOptions o = options_for(out, clock, false);
  o.print_every_steps = 3;
  o.print_every_seconds = 0;
  {
    ProgressBar bar(7, o);
    for (int i = 0; i < 7; ++i) {
      clock.seconds += 1;
      bar.update();
    }
  }
  CHECK(out.str() ==
        "3/7  42% | 1.0 step/s | ETA 0:04\n"
        "6/7  85% | 1.0 step/s | ETA 0:01\n"
        "7/7 100% | 1.0 step/s | ETA 0:00\n");
  CHECK(out.str().find('\r') == std::string::npos);

  std::ostringstream timed;
  o = options_for(timed, clock, false);
  o.print_every_seconds = 10;
  {
    ProgressBar bar(100, o);
    for (int i = 0; i < 30; ++i) {
      clock.seconds += 1;
      bar.update();
    }
    CHECK(timed.str() == " 10/100  10% | 1.0 step/s | ETA 1:30\n 20/100  20% | 1.0 step/s | ETA 1:20\n"
                         " 30/100  30% | 1.0 step/s | ETA 1:10\n");
    bar.close();  // the last line said 30 already: not repeated
    bar.update();  // closed: nothing more
  }
  const std::string printed = timed.str();
  CHECK(std::count(printed.begin(), printed.end(), '\n') == 3);
}

TEST_CASE("a disabled bar prints nothing; bad arguments are refused") {
  std::ostringstream out;
  FakeClock clock;
  ProgressBarOptions o = options_for(out, clock, true);
  o.enabled = false;
  {
    ProgressBar bar(3, o);
    bar.update(3);
  }
  CHECK(out.str().empty());
  CHECK_THROWS_WITH_AS(ProgressBar(5, {}, 6), "ProgressBar: total 5 and start 6 must be >= 0, with start <= total", Error);
  ProgressBarOptions bad;
  bad.print_every_steps = -1;
  CHECK_THROWS_AS(ProgressBar(5, bad), Error);
  ProgressBar bar(5, o);
  CHECK_THROWS_WITH_AS(bar.update(-1), "ProgressBar::update: steps -1 is negative", Error);
}

TEST_CASE("Accelerator::progress_bar prints on the main process (one process: this one)") {
  AcceleratorOptions ao;
  ao.print_settings = false;
  Accelerator accelerator(ao);
  std::ostringstream out;
  FakeClock clock;
  ProgressBarOptions o = options_for(out, clock, false);
  o.print_every_steps = 1;
  {
    auto bar = accelerator.progress_bar(2, o);
    clock.seconds += 1;
    bar.update();
  }
  CHECK(out.str() == "1/2  50% | 1.0 step/s | ETA 0:01\n");  // close adds no second line for the same count
}

TEST_CASE("write prints a line above the bar: on a terminal the bar moves below it") {
  std::ostringstream out;
  FakeClock clock;
  ProgressBarOptions o = options_for(out, clock, true);
  o.redraw_every_seconds = 0;
  {
    ProgressBar bar(10, o);
    bar.write("before any step");  // nothing drawn yet: just the line
    clock.seconds += 1;
    bar.update();
    bar.write("epoch 1");
    bar.close();
    bar.write("after");
  }
  const std::string drawn = " 1/10  10% | 1.0 step/s | ETA 0:09";
  CHECK(out.str() == "before any step\n\r" + drawn + "\repoch 1" + std::string(drawn.size() - 7, ' ') + "\n\r" + drawn +
                         "\r" + drawn + "\nafter\n");

  std::ostringstream plain;
  o = options_for(plain, clock, false);
  {
    ProgressBar bar(10, o);
    bar.write("epoch 1");
  }
  CHECK(plain.str() == "epoch 1\n");  // a bar that took no step prints no end line

  std::ostringstream silent;
  o.out = &silent;
  o.enabled = false;
  {
    ProgressBar bar(10, o);
    bar.write("epoch 1");
  }
  CHECK(silent.str().empty());
}
