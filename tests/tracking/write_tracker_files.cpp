// Writes one run's tracker files (log_with all) into DIR/run for check_tracker_files.py, which knows
// the same values from the formulas below and reads the files with its own decoders. Not a test.
#include <fmt/format.h>

#include <iostream>

#include "accel.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: write_tracker_files DIR\n";
    return 2;
  }
  try {
    accel::AcceleratorOptions options;
    options.print_settings = false;
    options.log_with = {"all"};
    options.project_configuration.project_dir = argv[1];
    accel::Accelerator accelerator(options);
    accelerator.init_trackers("run", {{"lr", 0.001}, {"model", "mlp"}, {"hidden", 64}});
    for (int step = 0; step < 10; ++step) {
      nlohmann::json values = {{"loss", 1.0 / (step + 1)}, {"lr", 0.001 * (step + 1)}};
      if (step >= 5) values["accuracy"] = step / 10.0;  // a name that comes later: a new CSV column
      if (step == 9) values["a,b"] = 42;                // a name the CSV header must quote
      accelerator.log(values, step);
    }
    accelerator.end_training();
  } catch (const accel::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
