// Prints `accel bench precision` rows one per line as they are measured, and writes them as JSON.
#include "bench/lib/precision_report.h"

#include <fmt/format.h>

#include <ostream>

namespace accel::bench {

void print_precision_columns(std::ostream& out) {
  out << fmt::format("# {:<7} {:<11} {:<15} {:<7} {:>22} {:>11} {:>10} {:<8} {:>10} {:>7}  {}\n", "device", "group",
                     "name", "dtype", "shape", "time (us)", "rate", "unit", "reference", "of ref", "reference is");
}

void print_precision_row(std::ostream& out, const PrecisionRow& r) {
  if (!r.available) {
    out << fmt::format("  {:<7} {:<11} {:<15} {:<7} {:>22} {:>11} {:>10} {:<8} {:>10} {:>7}  {}\n", r.device, r.group,
                       r.name, r.dtype, r.shape, "-", "-", r.unit, "-", "-", "not run: " + r.note);
    return;
  }
  const std::string reference = r.reference > 0 ? fmt::format("{:.1f}", r.reference) : "-";
  const std::string fraction = r.reference > 0 ? fmt::format("{:.1f}%", 100.0 * r.fraction()) : "-";
  out << fmt::format("  {:<7} {:<11} {:<15} {:<7} {:>22} {:>11.1f} {:>10.2f} {:<8} {:>10} {:>7}  {}\n", r.device,
                     r.group, r.name, r.dtype, r.shape, r.time_us, r.rate, r.unit, reference, fraction,
                     r.reference_name);
}

void print_precision_footer(std::ostream& out, const PrecisionReport& report) {
  out << fmt::format("# {} OpenMP threads on the CPU; median of {} runs after {} warm-up per row\n", report.threads,
                     report.iters, report.warmup);
  for (const PrecisionDevice& d : report.devices)
    out << fmt::format("# {}: {} (reference: {})\n", d.device, d.name, d.reference);
}

nlohmann::json to_json(const PrecisionReport& report) {
  nlohmann::json devices = nlohmann::json::array();
  for (const PrecisionDevice& d : report.devices)
    devices.push_back({{"device", d.device}, {"name", d.name}, {"reference", d.reference}});
  nlohmann::json rows = nlohmann::json::array();
  for (const PrecisionRow& r : report.rows) {
    rows.push_back({{"device", r.device},
                    {"group", r.group},
                    {"name", r.name},
                    {"dtype", r.dtype},
                    {"shape", r.shape},
                    {"available", r.available},
                    {"time_us", r.available ? nlohmann::json(r.time_us) : nlohmann::json(nullptr)},
                    {"rate", r.available ? nlohmann::json(r.rate) : nlohmann::json(nullptr)},
                    {"unit", r.unit},
                    {"reference", r.reference > 0 ? nlohmann::json(r.reference) : nlohmann::json(nullptr)},
                    {"reference_name", r.reference_name},
                    {"fraction", r.available && r.reference > 0 ? nlohmann::json(r.fraction()) : nlohmann::json(nullptr)},
                    {"note", r.note}});
  }
  return {{"benchmark", "precision"}, {"threads", report.threads}, {"warmup", report.warmup},
          {"iters", report.iters},    {"devices", devices},          {"rows", rows}};
}

}  // namespace accel::bench
