// The table and JSON of `accel bench precision` (docs/benchmarks.md documents the fields).
#pragma once

#include <nlohmann/json.hpp>

#include <iosfwd>

#include "bench/lib/precision_bench.h"

namespace accel::bench {

// The column titles, each row as it is measured, and a footer naming the devices and their references.
void print_precision_columns(std::ostream& out);
void print_precision_row(std::ostream& out, const PrecisionRow& row);
void print_precision_footer(std::ostream& out, const PrecisionReport& report);

nlohmann::json to_json(const PrecisionReport& report);

}  // namespace accel::bench
