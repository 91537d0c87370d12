// The built-in trackers' names: the names log_with takes (in code, ACCEL_LOG_WITH, the config file
// and `accel launch --log_with`), and how a list of them is checked. Apart from the trackers
// themselves, so that the config file's reader needs only these.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace accel {

// "jsonl", "csv", "tensorboard": what "all" stands for, in that order.
const std::vector<std::string>& builtin_tracker_names();
// The words for an error message: "jsonl, csv, tensorboard or all".
std::string tracker_choices();
// The names in a comma-separated list (spaces around a name are dropped; "" is the empty list), or
// nullopt when one of them is not a built-in name or "all".
std::optional<std::vector<std::string>> parse_tracker_list(const std::string& comma_separated);
// The names with "all" expanded and each name once, in the order first given.
std::vector<std::string> expand_tracker_names(const std::vector<std::string>& names);

}  // namespace accel
