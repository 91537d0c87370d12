// The protobuf wire format written by hand: a field is a key (field number << 3 | wire type) then a
// varint, 8 or 4 little-endian bytes, or a length and bytes. Hand-written because these are a dozen
// fields of four messages; libprotobuf would add protoc, the .proto files and a build step for them.
#include "runtime/tracking/event_proto.h"

#include <bit>
#include <cstring>

namespace accel {

namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

void key(std::string& out, uint32_t field, WireType type) { varint(out, (static_cast<uint64_t>(field) << 3) | type); }

void bytes_field(std::string& out, uint32_t field, const std::string& bytes) {
  key(out, field, kLengthDelimited);
  varint(out, bytes.size());
  out += bytes;
}

template <class T>
void fixed_field(std::string& out, uint32_t field, T value) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8);
  static_assert(std::endian::native == std::endian::little, "the wire format's fixed fields are little-endian");
  key(out, field, sizeof(T) == 8 ? kFixed64 : kFixed32);
  unsigned char raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));
  out.append(reinterpret_cast<const char*>(raw), sizeof(T));
}

// Event: wall_time = 1 (double), step = 2 (int64), file_version = 3 (string), summary = 5 (Summary).
std::string event_head(double wall_time, int64_t step) {
  std::string event;
  fixed_field(event, 1, wall_time);
  if (step != 0) {  // proto3 leaves a zero out
    key(event, 2, kVarint);
    varint(event, static_cast<uint64_t>(step));
  }
  return event;
}

std::string summary_event(double wall_time, int64_t step, const std::vector<std::string>& values) {
  std::string summary;  // Summary: repeated Value value = 1
  for (const std::string& value : values) bytes_field(summary, 1, value);
  std::string event = event_head(wall_time, step);
  bytes_field(event, 5, summary);
  return event;
}

}  // namespace

std::string file_version_event(double wall_time) {
  std::string event = event_head(wall_time, 0);
  bytes_field(event, 3, "brain.Event:2");
  return event;
}

std::string scalars_event(double wall_time, int64_t step, const std::vector<std::pair<std::string, float>>& scalars) {
  std::vector<std::string> values;
  for (const auto& [tag, scalar] : scalars) {
    std::string value;  // Summary.Value: tag = 1, simple_value = 2 (float)
    bytes_field(value, 1, tag);
    fixed_field(value, 2, scalar);
    values.push_back(value);
  }
  return summary_event(wall_time, step, values);
}

std::string text_event(double wall_time, int64_t step, const std::string& tag, const std::string& text) {
  std::string plugin_data, metadata, tensor, value;
  bytes_field(plugin_data, 1, "text");           // PluginData.plugin_name = 1
  bytes_field(metadata, 1, plugin_data);         // SummaryMetadata.plugin_data = 1
  key(tensor, 1, kVarint);                       // TensorProto.dtype = 1: DT_STRING (7)
  varint(tensor, 7);
  bytes_field(tensor, 2, "");                    // tensor_shape = 2: no dims, a scalar
  bytes_field(tensor, 8, text);                  // string_val = 8
  bytes_field(value, 1, tag);                    // Summary.Value: tag = 1, metadata = 9, tensor = 8
  bytes_field(value, 9, metadata);
  bytes_field(value, 8, tensor);
  return summary_event(wall_time, step, {value});
}

}  // namespace accel
