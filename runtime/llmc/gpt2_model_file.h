// llm.c's GPT-2 model files (gpt2_124M.bin, gpt2_124M_bf16.bin, as train_gpt2.py's write_model and
// train_gpt2.cu write them): a header of 256 little-endian int32 (magic 20240326, version 3 for f32
// or 5 for bf16, then max_seq_len, vocab_size, num_layers, num_heads, channels, padded_vocab_size, the
// rest 0), then llm.c's 16 parameter tensors back to back. Parsed into a plain struct here, with every
// field checked, on the tensor floor only; runtime/llmc/gpt2_model_weights.h moves it into an nn::GPT.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace accel::llmc {

inline constexpr int32_t kModelFileMagic = 20240326;
inline constexpr int32_t kModelFileVersionF32 = 3;
inline constexpr int32_t kModelFileVersionBF16 = 5;
inline constexpr size_t kModelFileHeaderInts = 256;
inline constexpr size_t kModelFileHeaderBytes = 4 * kModelFileHeaderInts;

// The header's fields under llm.c's GPT2Config names. The reserved ints (8 to 255) are ignored, as
// llm.c ignores them.
struct Gpt2ModelHeader {
  DType dtype = DType::f32;       // f32 (version 3) or bf16 (version 5); every tensor has it
  int64_t max_seq_len = 0;        // maxT: wpe's rows
  int64_t vocab_size = 0;         // V, the real vocab
  int64_t num_layers = 0;         // L
  int64_t num_heads = 0;          // NH
  int64_t channels = 0;           // C
  int64_t padded_vocab_size = 0;  // Vp >= V: wte's rows

  int32_t version() const;
  // The 16 tensors in file order, by llm.c's names: wte [Vp, C], wpe [maxT, C], ln1w [L, C], ln1b,
  // qkvw [L, 3C, C], qkvb [L, 3C], attprojw [L, C, C], attprojb [L, C], ln2w, ln2b, fcw [L, 4C, C],
  // fcb [L, 4C], fcprojw [L, C, 4C], fcprojb [L, C], lnfw [C], lnfb [C].
  std::vector<std::pair<std::string, Shape>> tensor_shapes() const;
  // The file's size: the header then every parameter in dtype. Throws when it overflows.
  uint64_t file_bytes() const;
};

struct Gpt2ModelFile {
  Gpt2ModelHeader header;
  std::vector<std::pair<std::string, Tensor>> tensors;  // CPU tensors of header.dtype, as tensor_shapes()

  // The tensor llm.c calls name (e.g. "qkvw"); throws naming it when absent.
  const Tensor& at(const std::string& name) const;
};

// Checks a header (the first kModelFileHeaderBytes of header_bytes) field by field and against the
// whole file's size; name says where it came from in errors ("read_gpt2_model: FILE: vocab_size is 0,
// expected > 0").
Gpt2ModelHeader parse_gpt2_model_header(std::span<const uint8_t> header_bytes, uint64_t file_size,
                                        const std::string& name);
// A whole file's bytes.
Gpt2ModelFile parse_gpt2_model(std::span<const uint8_t> bytes, const std::string& name);
// Reads the header, checks it against the file's size, then each tensor straight into its storage.
Gpt2ModelFile read_gpt2_model(const std::string& path);

// The file's bytes; throws when a tensor's name, shape or dtype is not the header's, or a size does
// not fit the header's int32.
std::vector<uint8_t> gpt2_model_bytes(const Gpt2ModelFile& model);
// The same bytes, through a temporary file renamed over path once complete.
void write_gpt2_model(const std::string& path, const Gpt2ModelFile& model);

}  // namespace accel::llmc
