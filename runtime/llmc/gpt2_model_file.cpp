// llm.c's GPT-2 model file: the header's fields checked one by one, the sizes they imply checked for
// overflow and against the file, then the tensors read or written in llm.c's order.
#include "runtime/llmc/gpt2_model_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include "kernels/error.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"
#include "tensor/shape.h"

namespace accel::llmc {

// llm.c writes the header and the tensors in the host's order, little-endian on every machine it runs on.
static_assert(std::endian::native == std::endian::little, "llm.c's model files are read as little-endian");

namespace {

int32_t header_int(std::span<const uint8_t> bytes, size_t i) {
  int32_t v = 0;
  std::memcpy(&v, bytes.data() + 4 * i, 4);
  return v;
}

// The six size fields in header order (ints 2 to 7), by llm.c's names.
struct SizeField {
  const char* name;
  int64_t Gpt2ModelHeader::*member;
};
constexpr SizeField kSizeFields[] = {
    {"max_seq_len", &Gpt2ModelHeader::max_seq_len}, {"vocab_size", &Gpt2ModelHeader::vocab_size},
    {"num_layers", &Gpt2ModelHeader::num_layers},   {"num_heads", &Gpt2ModelHeader::num_heads},
    {"channels", &Gpt2ModelHeader::channels},       {"padded_vocab_size", &Gpt2ModelHeader::padded_vocab_size}};

// The size fields on their own and against each other; where starts each message ("op: file").
void check_fields(const Gpt2ModelHeader& h, const std::string& where) {
  for (const SizeField& f : kSizeFields) {
    const int64_t v = h.*f.member;
    if (v <= 0) throw Error(fmt::format("{}: {} is {}, expected > 0", where, f.name, v));
    if (v > std::numeric_limits<int32_t>::max())
      throw Error(fmt::format("{}: {} is {}, more than the header's int32 holds", where, f.name, v));
  }
  if (h.padded_vocab_size < h.vocab_size)
    throw Error(
        fmt::format("{}: padded_vocab_size {} is less than vocab_size {}", where, h.padded_vocab_size, h.vocab_size));
  if (h.channels % h.num_heads != 0)
    throw Error(fmt::format("{}: channels {} is not a multiple of num_heads {}", where, h.channels, h.num_heads));
}

// The file size the header implies, or empty with the tensor whose size overflows int64 in `overflowing`.
std::optional<int64_t> implied_file_bytes(const Gpt2ModelHeader& h, std::string& overflowing) {
  int64_t total = static_cast<int64_t>(kModelFileHeaderBytes);
  for (const auto& [name, shape] : h.tensor_shapes()) {
    std::optional<int64_t> n = static_cast<int64_t>(dtype_size(h.dtype));
    for (const int64_t d : shape)
      if (n) n = mul_checked(*n, d);
    if (n) n = add_checked(total, *n);
    if (!n) {
      overflowing = fmt::format("{} {}", name, shape_str(shape));
      return std::nullopt;
    }
    total = *n;
  }
  return total;
}

DType dtype_of_version(int32_t version, const std::string& where) {
  if (version == kModelFileVersionF32) return DType::f32;
  if (version == kModelFileVersionBF16) return DType::bf16;
  throw Error(fmt::format("{}: version is {}, expected {} (f32) or {} (bf16)", where, version, kModelFileVersionF32,
                          kModelFileVersionBF16));
}

const char* magic_hint(int32_t magic) {
  if (magic == 20240520) return "; 20240520 is an llm.c token shard's";
  if (magic == 20240327) return "; 20240327 is llm.c's debug state file's";
  return "";
}

// The tensors of model, checked against its header, on the host and contiguous.
std::vector<Tensor> checked_host_tensors(const Gpt2ModelFile& model, const std::string& where) {
  const Gpt2ModelHeader& h = model.header;
  check_fields(h, where);
  (void)h.version();  // a dtype llm.c's files cannot hold
  const auto shapes = h.tensor_shapes();
  if (model.tensors.size() != shapes.size())
    throw Error(fmt::format("{}: {} tensors, expected llm.c's {}", where, model.tensors.size(), shapes.size()));
  std::vector<Tensor> host;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto& [name, t] = model.tensors[i];
    if (name != shapes[i].first || !t.defined() || t.shape() != shapes[i].second || t.dtype() != h.dtype)
      throw Error(fmt::format("{}: tensor {} is {} {}, expected {} {} {}", where, i, name,
                              t.defined() ? t.str() : "undefined", shapes[i].first, dtype_name(h.dtype),
                              shape_str(shapes[i].second)));
    host.push_back(nograd::contiguous(nograd::to_device(t, Device::cpu())));
  }
  return host;
}

std::vector<int32_t> header_ints(const Gpt2ModelHeader& h) {
  std::vector<int32_t> ints(kModelFileHeaderInts, 0);
  ints[0] = kModelFileMagic;
  ints[1] = h.version();
  for (size_t i = 0; i < std::size(kSizeFields); ++i) ints[2 + i] = static_cast<int32_t>(h.*kSizeFields[i].member);
  return ints;
}

}  // namespace

int32_t Gpt2ModelHeader::version() const {
  if (dtype == DType::f32) return kModelFileVersionF32;
  if (dtype == DType::bf16) return kModelFileVersionBF16;
  throw Error(fmt::format("Gpt2ModelHeader: dtype {}, but llm.c's files hold f32 (version 3) or bf16 (version 5)",
                          dtype_name(dtype)));
}

std::vector<std::pair<std::string, Shape>> Gpt2ModelHeader::tensor_shapes() const {
  const int64_t L = num_layers, C = channels;
  return {{"wte", {padded_vocab_size, C}},
          {"wpe", {max_seq_len, C}},
          {"ln1w", {L, C}},
          {"ln1b", {L, C}},
          {"qkvw", {L, 3 * C, C}},
          {"qkvb", {L, 3 * C}},
          {"attprojw", {L, C, C}},
          {"attprojb", {L, C}},
          {"ln2w", {L, C}},
          {"ln2b", {L, C}},
          {"fcw", {L, 4 * C, C}},
          {"fcb", {L, 4 * C}},
          {"fcprojw", {L, C, 4 * C}},
          {"fcprojb", {L, C}},
          {"lnfw", {C}},
          {"lnfb", {C}}};
}

uint64_t Gpt2ModelHeader::file_bytes() const {
  std::string overflowing;
  const std::optional<int64_t> bytes = implied_file_bytes(*this, overflowing);
  if (!bytes) throw Error(fmt::format("Gpt2ModelHeader::file_bytes: {} has more bytes than int64 counts", overflowing));
  return static_cast<uint64_t>(*bytes);
}

const Tensor& Gpt2ModelFile::at(const std::string& name) const {
  for (const auto& [key, t] : tensors)
    if (key == name) return t;
  throw Error(fmt::format("Gpt2ModelFile::at: no tensor named '{}' (llm.c's names: wte, wpe, ln1w, ..., lnfb)", name));
}

Gpt2ModelHeader parse_gpt2_model_header(std::span<const uint8_t> header_bytes, uint64_t file_size,
                                        const std::string& name) {
  const std::string where = "read_gpt2_model: " + name;
  if (header_bytes.size() < kModelFileHeaderBytes || file_size < kModelFileHeaderBytes)
    throw Error(fmt::format("{}: the header is truncated ({} bytes, expected {})", where,
                            std::min<uint64_t>(header_bytes.size(), file_size), kModelFileHeaderBytes));
  if (const int32_t magic = header_int(header_bytes, 0); magic != kModelFileMagic)
    throw Error(fmt::format("{}: magic is {}, expected {} (an llm.c GPT-2 model file){}", where, magic, kModelFileMagic,
                            magic_hint(magic)));
  Gpt2ModelHeader h;
  h.dtype = dtype_of_version(header_int(header_bytes, 1), where);
  for (size_t i = 0; i < std::size(kSizeFields); ++i) h.*kSizeFields[i].member = header_int(header_bytes, 2 + i);
  check_fields(h, where);
  std::string overflowing;
  const std::optional<int64_t> expected = implied_file_bytes(h, overflowing);
  if (!expected)
    throw Error(fmt::format("{}: the sizes overflow: {} has more bytes than int64 counts", where, overflowing));
  if (static_cast<uint64_t>(*expected) != file_size)
    throw Error(fmt::format(
        "{}: the header says {} bytes of {} parameters follow it, but {} bytes do (the file is {})", where,
        *expected - static_cast<int64_t>(kModelFileHeaderBytes), dtype_name(h.dtype), file_size - kModelFileHeaderBytes,
        static_cast<uint64_t>(*expected) > file_size ? "truncated" : "longer than its header says"));
  return h;
}

Gpt2ModelFile parse_gpt2_model(std::span<const uint8_t> bytes, const std::string& name) {
  Gpt2ModelFile model;
  model.header = parse_gpt2_model_header(bytes, bytes.size(), name);
  size_t offset = kModelFileHeaderBytes;
  for (const auto& [key, shape] : model.header.tensor_shapes()) {
    Tensor t = empty(shape, model.header.dtype);
    std::memcpy(t.data_ptr(), bytes.data() + offset, t.nbytes());  // within the size checked above
    offset += t.nbytes();
    model.tensors.emplace_back(key, std::move(t));
  }
  return model;
}

Gpt2ModelFile read_gpt2_model(const std::string& path) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  if (ec || !in)
    throw Error(fmt::format("read_gpt2_model: {}: cannot be opened{}", path, ec ? ": " + ec.message() : ""));
  std::vector<uint8_t> header(std::min<uint64_t>(size, kModelFileHeaderBytes));
  in.read(reinterpret_cast<char*>(header.data()), static_cast<std::streamsize>(header.size()));
  Gpt2ModelFile model;
  model.header = parse_gpt2_model_header(header, size, path);
  for (const auto& [key, shape] : model.header.tensor_shapes()) {
    Tensor t = empty(shape, model.header.dtype);
    if (!in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes())))
      throw Error(fmt::format("read_gpt2_model: {}: reading {} failed; did the file change while loading?", path, key));
    model.tensors.emplace_back(key, std::move(t));
  }
  return model;
}

std::vector<uint8_t> gpt2_model_bytes(const Gpt2ModelFile& model) {
  const std::vector<Tensor> host = checked_host_tensors(model, "write_gpt2_model");
  const std::vector<int32_t> ints = header_ints(model.header);
  std::vector<uint8_t> bytes(model.header.file_bytes());
  std::memcpy(bytes.data(), ints.data(), kModelFileHeaderBytes);
  size_t offset = kModelFileHeaderBytes;
  for (const Tensor& t : host) {
    if (t.nbytes() > 0) std::memcpy(bytes.data() + offset, t.data_ptr(), t.nbytes());
    offset += t.nbytes();
  }
  return bytes;
}

void write_gpt2_model(const std::string& path, const Gpt2ModelFile& model) {
  const std::string where = "write_gpt2_model: " + path;
  const std::vector<Tensor> host = checked_host_tensors(model, where);
  const std::vector<int32_t> ints = header_ints(model.header);
  const std::string temp = path + ".tmp";
  std::error_code ec;
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(ints.data()), static_cast<std::streamsize>(kModelFileHeaderBytes));
    for (const Tensor& t : host)
      out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    out.close();
    if (!out) {
      std::filesystem::remove(temp, ec);
      throw Error(fmt::format("{}: cannot be written", where));
    }
  }
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(temp, ec);
    throw Error(fmt::format("{}: renaming {} over it failed: {}", where, temp, why));
  }
}

}  // namespace accel::llmc
