// The safetensors file format (github.com/huggingface/safetensors): named tensors plus string metadata.
// Readers check the whole header against the file size before they read a single tensor byte.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace accel {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
// The header's "__metadata__" object: free-form text, e.g. {"format": "pt"}.
using SafetensorsMetadata = std::map<std::string, std::string>;

struct SafetensorsContents {
  NamedTensors tensors;  // CPU tensors in the order their bytes appear in the file
  SafetensorsMetadata metadata;

  // The tensor called name; throws accel::Error naming the missing name.
  const Tensor& at(const std::string& name) const;
};

// The reference reader refuses larger headers, and so do we.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// Serialises tensors (any device, any layout) and metadata. Tensors are stored in the reference writer's
// order: by dtype size, largest first, then by name. That keeps every tensor aligned to its element size
// in the file (the header is padded to 8 bytes), and makes our files byte-identical to the reference's.
std::vector<uint8_t> to_safetensors_bytes(const NamedTensors& tensors, const SafetensorsMetadata& metadata = {});
// Writes the same bytes to path through a temporary file that is renamed over path only when complete,
// so a failed save never leaves a truncated checkpoint behind.
void save_safetensors(const std::string& path, const NamedTensors& tensors, const SafetensorsMetadata& metadata = {});

// Parses a whole file's bytes. Throws accel::Error on anything the format forbids or accel cannot hold
// (dtypes other than F64, F32, F16, BF16, I64, I32, BOOL).
SafetensorsContents from_safetensors_bytes(std::span<const uint8_t> bytes);
SafetensorsContents load_safetensors(const std::string& path);

// A tensor as the header lists it, without its bytes.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t file_offset = 0;  // where its bytes begin in the file
};
struct SafetensorsHeader {
  std::vector<SafetensorsEntry> tensors;  // in the order of their bytes in the file
  SafetensorsMetadata metadata;
  int64_t element_count() const;  // of every tensor: a model file's parameter count
};
// Reads and checks only the header (against the file's size, as load_safetensors does), so a
// multi-gigabyte model file is described without being read.
SafetensorsHeader load_safetensors_header(const std::string& path);
// Elements [first, first + count) of entry (row-major, of a header load_safetensors_header read from
// path) as a 1-D CPU tensor, reading only their bytes: how a rank loads just its slice of a large
// model file. Throws accel::Error naming the file, the tensor and the range when it is outside the
// tensor.
Tensor read_safetensors_elements(const std::string& path, const SafetensorsEntry& entry, int64_t first, int64_t count);

}  // namespace accel
