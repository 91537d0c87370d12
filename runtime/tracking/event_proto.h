// TensorBoard's Event protos (tensorflow/core/util/event.proto, summary.proto) in protobuf's wire
// format, for the few fields an event file of scalars needs: Event{wall_time, step, file_version |
// summary}, Summary{value: [{tag, simple_value}]}, and a text summary (the text plugin's string tensor).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace accel {

// The first event of every file: file_version "brain.Event:2".
std::string file_version_event(double wall_time);
// One event holding a Summary with one simple_value per (tag, value).
std::string scalars_event(double wall_time, int64_t step, const std::vector<std::pair<std::string, float>>& scalars);
// One event holding a Summary whose value is text under tag, which TensorBoard's Text tab shows.
std::string text_event(double wall_time, int64_t step, const std::string& tag, const std::string& text);

}  // namespace accel
