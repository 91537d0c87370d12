// safetensors reading and writing. The reader follows the reference's validation (safetensors/src/tensor.rs):
// header length limits, a JSON object header, offsets that tile the data buffer exactly, sizes that match
// dtype x shape; and it adds the checks accel needs (no duplicate keys, dims that fit int64, bools 0/1).
#include "runtime/safetensors.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"

namespace accel {

// The format is little-endian and we copy tensor bytes straight into host-order storage.
static_assert(std::endian::native == std::endian::little, "accel's safetensors I/O assumes a little-endian host");

namespace {

// ordered_json keeps the header's key order, so tensors that share an offset keep it when sorted.
using Json = nlohmann::ordered_json;

constexpr const char* kMetadataKey = "__metadata__";
// serde_json, which the reference reads headers with, stops at 128 levels; a real header has 3.
constexpr int kMaxHeaderDepth = 128;

struct FormatDType {
  DType dtype;
  const char* name;
  // Position in the reference's Dtype enum; its writer orders tensors by this, largest first.
  int reference_rank;
};

// The reference's enum runs BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64,
// U64; only the order of the ones accel has matters.
constexpr FormatDType kFormatDTypes[] = {
    {DType::f64, "F64", 7},          {DType::f32, "F32", 6},          {DType::f16, "F16", 3},
    {DType::bf16, "BF16", 4},        {DType::i64, "I64", 8},          {DType::i32, "I32", 5},
    {DType::boolean, "BOOL", 0},     {DType::f8_e4m3, "F8_E4M3", 2}, {DType::f8_e5m2, "F8_E5M2", 1},
};

const FormatDType& format_dtype(DType dtype) {
  for (const FormatDType& f : kFormatDTypes)
    if (f.dtype == dtype) return f;
  throw Error(fmt::format("safetensors: dtype {} has no safetensors name", dtype_name(dtype)));
}

// A tensor as the header describes it, checked on its own; data offsets are relative to the data buffer.
struct Entry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// A header value in an error message, cut short so that a hostile header cannot flood the message.
std::string brief(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 64) text = text.substr(0, 61) + "...";
  return text;
}

Json parse_json(const std::string& ctx, const std::string& text) {
  // nlohmann's lexer reads a NUL byte as the end of the input, which would accept "{}\0anything".
  if (const size_t nul = text.find('\0'); nul != std::string::npos)
    throw Error(fmt::format("{}: header is not valid JSON: it holds a NUL byte at offset {}", ctx, nul));
  // nlohmann keeps the last of duplicate keys; the callback sees every key, so we can refuse them. It also
  // bounds the nesting, as the reference's JSON parser does, so a hostile header cannot exhaust memory.
  std::vector<std::unordered_set<std::string>> open_objects;
  auto check_keys_and_depth = [&](int depth, Json::parse_event_t event, Json& parsed) {
    const bool opens = event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start;
    if (opens && depth >= kMaxHeaderDepth)
      throw Error(fmt::format("{}: header nests deeper than {} levels", ctx, kMaxHeaderDepth));
    if (event == Json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      open_objects.pop_back();
    } else if (event == Json::parse_event_t::key) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second)
        throw Error(fmt::format("{}: header has the key '{}' twice", ctx, key));
    }
    return true;
  };
  try {
    return Json::parse(text, check_keys_and_depth);
  } catch (const Json::exception& e) {
    std::string what = e.what();
    if (const size_t tag_end = what.find("] "); what.starts_with("[json.exception") && tag_end != std::string::npos)
      what = what.substr(tag_end + 2);
    throw Error(fmt::format("{}: header is not valid JSON: {}", ctx, what));
  }
}

// Reads a non-negative integer that fits in int64 (shape entries and offsets), or returns false.
bool get_index(const Json& value, uint64_t& out) {
  if (!value.is_number_unsigned()) return false;
  out = value.get<uint64_t>();
  return out <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

Entry parse_entry(const std::string& ctx, const std::string& name, const Json& info) {
  const std::string where = fmt::format("{}: tensor '{}'", ctx, name);
  if (!info.is_object())
    throw Error(fmt::format("{}: expected an object with dtype, shape and data_offsets, got {}", where,
                            brief(info)));
  auto field = [&](const char* key) -> const Json& {
    const auto it = info.find(key);
    if (it == info.end()) throw Error(fmt::format("{}: missing field '{}'", where, key));
    return *it;
  };

  Entry entry;
  entry.name = name;
  const Json& dtype = field("dtype");
  if (!dtype.is_string()) throw Error(fmt::format("{}: dtype must be a string, got {}", where, brief(dtype)));
  const auto& dtype_text = dtype.get_ref<const std::string&>();
  const auto known = std::find_if(std::begin(kFormatDTypes), std::end(kFormatDTypes),
                                  [&](const FormatDType& f) { return dtype_text == f.name; });
  if (known == std::end(kFormatDTypes))
    throw Error(fmt::format("{}: dtype {} is not supported by accel (it reads F64, F32, F16, BF16, I64, I32, BOOL, F8_E4M3, F8_E5M2)",
                            where, brief(dtype)));
  entry.dtype = known->dtype;

  const Json& shape = field("shape");
  if (!shape.is_array())
    throw Error(fmt::format("{}: shape must be an array of non-negative integers, got {}", where, brief(shape)));
  for (size_t i = 0; i < shape.size(); ++i) {
    uint64_t dim = 0;
    if (!get_index(shape[i], dim))
      throw Error(fmt::format("{}: shape entry {} is {}; expected a non-negative integer below 2^63", where, i,
                              brief(shape[i])));
    entry.shape.push_back(static_cast<int64_t>(dim));
  }
  // The product of the non-zero dims bounds every stride, so it must fit in int64 even when numel is 0;
  // the byte count must fit as well.
  uint64_t product = 1;
  bool has_zero = false;
  bool overflow = false;
  for (int64_t dim : entry.shape) {
    has_zero = has_zero || dim == 0;
    if (dim != 0) overflow = overflow || __builtin_mul_overflow(product, static_cast<uint64_t>(dim), &product);
  }
  uint64_t nbytes = 0;
  overflow = overflow || product > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
             __builtin_mul_overflow(has_zero ? 0 : product, dtype_size(entry.dtype), &nbytes);
  if (overflow)
    throw Error(fmt::format("{}: shape {} of {} is too large: its size overflows 64 bits", where,
                            brief(shape), dtype_text));

  const Json& offsets = field("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !get_index(offsets[0], entry.begin) ||
      !get_index(offsets[1], entry.end))
    throw Error(fmt::format("{}: data_offsets must be [begin, end] with non-negative integers, got {}", where,
                            brief(offsets)));
  if (entry.end < entry.begin)
    throw Error(fmt::format("{}: data_offsets [{}, {}] end before they begin", where, entry.begin, entry.end));
  if (entry.end - entry.begin != nbytes)
    throw Error(fmt::format("{}: data_offsets [{}, {}] hold {} bytes, but {} {} needs {}", where, entry.begin,
                            entry.end, entry.end - entry.begin, dtype_text, shape_str(entry.shape), nbytes));
  return entry;
}

SafetensorsMetadata parse_metadata(const std::string& ctx, const Json& value) {
  SafetensorsMetadata metadata;
  if (value.is_null()) return metadata;  // the reference reads a null __metadata__ as none
  if (!value.is_object())
    throw Error(fmt::format("{}: __metadata__ must be an object of strings, got {}", ctx, brief(value)));
  for (const auto& [key, text] : value.items()) {
    if (!text.is_string())
      throw Error(fmt::format("{}: __metadata__ entry '{}' must be a string, got {}", ctx, key, brief(text)));
    metadata.emplace(key, text.get<std::string>());
  }
  return metadata;
}

// Checks the header against a data buffer of data_size bytes; returns the entries in data order.
std::vector<Entry> check_header(const std::string& ctx, const Json& header, uint64_t data_size,
                                SafetensorsMetadata& metadata) {
  if (!header.is_object())
    throw Error(fmt::format("{}: header must be a JSON object, got {}", ctx, brief(header)));
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey)
      metadata = parse_metadata(ctx, value);
    else
      entries.push_back(parse_entry(ctx, key, value));
  }
  // Like the reference: writers may list tensors in any order, but the bytes must tile the buffer.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
  });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    const std::string where = fmt::format("{}: tensor '{}': data_offsets [{}, {}]", ctx, e.name, e.begin, e.end);
    if (e.end > data_size)
      throw Error(fmt::format("{} run past the end of the {}-byte data buffer", where, data_size));
    if (e.begin > covered)
      throw Error(fmt::format("{} leave bytes [{}, {}) of the data buffer unused", where, covered, e.begin));
    if (e.begin < covered)
      throw Error(fmt::format("{} overlap tensor '{}' at [{}, {}]", where, previous->name, previous->begin,
                              previous->end));
    covered = e.end;
    previous = &e;
  }
  if (covered != data_size)
    throw Error(fmt::format("{}: the tensors cover {} bytes of the {}-byte data buffer; the last {} bytes are unused",
                            ctx, covered, data_size, data_size - covered));
  return entries;
}

// The header over any byte source, checked against the file size: the tensors' entries (sorted by
// offset) and the metadata; data_start is where the data buffer begins.
template <class Read>
std::vector<Entry> read_header(const std::string& ctx, uint64_t total, Read&& read, SafetensorsMetadata& metadata,
                               uint64_t& data_start) {
  if (total < 8)
    throw Error(fmt::format("{}: {} bytes is too short for a safetensors file, which starts with an 8-byte header "
                            "length",
                            ctx, total));
  uint8_t length_bytes[8];
  read(0, length_bytes, 8);
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = header_length << 8 | length_bytes[i];
  if (header_length > kSafetensorsMaxHeaderBytes)
    throw Error(fmt::format("{}: header length {} exceeds the limit of {} bytes", ctx, header_length,
                            kSafetensorsMaxHeaderBytes));
  if (header_length > total - 8)
    throw Error(fmt::format("{}: header length {} runs past the end of the {}-byte file", ctx, header_length, total));
  std::string text(header_length, '\0');
  read(8, text.data(), header_length);

  data_start = 8 + header_length;
  return check_header(ctx, parse_json(ctx, text), total - data_start, metadata);
}

// The whole reader over any byte source: read(offset, destination, count) copies exactly count bytes.
template <class Read>
SafetensorsContents read_safetensors(const std::string& ctx, uint64_t total, Read&& read) {
  SafetensorsContents contents;
  uint64_t data_start = 0;
  const std::vector<Entry> entries = read_header(ctx, total, read, contents.metadata, data_start);
  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, e.dtype);
    if (e.end > e.begin) read(data_start + e.begin, t.data_ptr(), e.end - e.begin);
    if (e.dtype == DType::boolean) {
      // A bool holding another byte is undefined behaviour in C++; refuse it rather than guess.
      const auto* bytes = static_cast<const uint8_t*>(t.data_ptr());
      for (uint64_t i = 0; i < e.end - e.begin; ++i)
        if (bytes[i] > 1)
          throw Error(fmt::format("{}: tensor '{}': BOOL element {} is byte {:#04x}; expected 0 or 1", ctx, e.name,
                                  i, bytes[i]));
    }
    contents.tensors.emplace_back(e.name, std::move(t));
  }
  return contents;
}

// --- writing ---

void check_utf8(const char* op, const std::string& what, const std::string& text) {
  try {
    (void)Json(text).dump();
  } catch (const Json::type_error&) {
    throw Error(fmt::format("{}: {} is not valid UTF-8", op, what));
  }
}

// The 8-byte length, the padded JSON header, and the order in which tensor bytes follow it.
struct FilePlan {
  std::string prefix;
  std::vector<size_t> order;
};

FilePlan plan_file(const char* op, const NamedTensors& tensors, const SafetensorsMetadata& metadata) {
  std::unordered_set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    check_utf8(op, fmt::format("tensor name {:?}", name), name);
    if (name == kMetadataKey)
      throw Error(fmt::format("{}: the name '{}' is reserved for the metadata and cannot name a tensor", op, name));
    if (!seen.insert(name).second) throw Error(fmt::format("{}: tensor name '{}' appears twice", op, name));
    if (!t.defined()) throw Error(fmt::format("{}: tensor '{}' is undefined", op, name));
    format_dtype(t.dtype());
  }
  for (const auto& [key, value] : metadata) {
    check_utf8(op, fmt::format("__metadata__ key {:?}", key), key);
    check_utf8(op, fmt::format("__metadata__ value of '{}'", key), value);
  }

  FilePlan plan;
  plan.order.resize(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) plan.order[i] = i;
  // The reference writer's order (see the header); std::string compares bytes as unsigned, as Rust does.
  std::sort(plan.order.begin(), plan.order.end(), [&](size_t a, size_t b) {
    const int rank_a = format_dtype(tensors[a].second.dtype()).reference_rank;
    const int rank_b = format_dtype(tensors[b].second.dtype()).reference_rank;
    if (rank_a != rank_b) return rank_a > rank_b;
    return tensors[a].first < tensors[b].first;
  });

  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header[kMetadataKey] = std::move(meta);
  }
  uint64_t offset = 0;
  for (size_t i : plan.order) {
    const Tensor& t = tensors[i].second;
    const uint64_t nbytes = t.nbytes();
    header[tensors[i].first] = Json{{"dtype", format_dtype(t.dtype()).name},
                                    {"shape", t.shape()},
                                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the reference pads so that the data starts 8-aligned
  uint64_t length = text.size();
  plan.prefix.resize(8);
  for (int i = 0; i < 8; ++i, length >>= 8) plan.prefix[i] = static_cast<char>(length & 0xff);
  plan.prefix += text;
  return plan;
}

// The tensor's elements in row-major order on the host.
Tensor host_contiguous(const Tensor& t) { return nograd::contiguous(nograd::to_device(t, Device::cpu())); }

// An open FILE* that is closed, and the temporary file removed, unless commit() succeeded.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)), file_(std::fopen(path_.c_str(), "wb")) {}
  ~TempFile() {
    if (file_ != nullptr) std::fclose(file_);
    if (!committed_) std::remove(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  bool is_open() const { return file_ != nullptr; }
  bool write(const void* data, size_t n) { return n == 0 || std::fwrite(data, 1, n, file_) == n; }
  // Flushes the file to the disk (fsync), closes it and renames it to target; returns false (errno
  // set) on failure. The fsync first means the rename never exposes a file whose bytes are not there.
  bool commit(const std::string& target) {
    const bool synced = std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
    const int closed = std::fclose(file_);
    if (!synced) {
      file_ = nullptr;
      return false;
    }
    file_ = nullptr;
    if (closed != 0 || std::rename(path_.c_str(), target.c_str()) != 0) return false;
    committed_ = true;
    return true;
  }

 private:
  std::string path_;
  std::FILE* file_;
  bool committed_ = false;
};

}  // namespace

const Tensor& SafetensorsContents::at(const std::string& name) const {
  for (const auto& [key, t] : tensors)
    if (key == name) return t;
  std::string names;
  for (size_t i = 0; i < tensors.size() && i < 8; ++i) names += (i ? ", " : "") + tensors[i].first;
  if (tensors.size() > 8) names += ", ...";
  throw Error(fmt::format("SafetensorsContents::at: no tensor named '{}' among the {} tensors [{}]", name,
                          tensors.size(), names));
}

std::vector<uint8_t> to_safetensors_bytes(const NamedTensors& tensors, const SafetensorsMetadata& metadata) {
  const FilePlan plan = plan_file("to_safetensors_bytes", tensors, metadata);
  std::vector<uint8_t> bytes(plan.prefix.begin(), plan.prefix.end());
  for (size_t i : plan.order) {
    const Tensor host = host_contiguous(tensors[i].second);
    const auto* data = static_cast<const uint8_t*>(host.data_ptr());
    if (host.nbytes() > 0) bytes.insert(bytes.end(), data, data + host.nbytes());
  }
  return bytes;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors, const SafetensorsMetadata& metadata) {
  const FilePlan plan = plan_file("save_safetensors", tensors, metadata);
  const std::string temp_path = path + ".tmp";
  TempFile file(temp_path);
  if (!file.is_open())
    throw Error(fmt::format("save_safetensors: cannot open '{}' for writing: {}", temp_path, std::strerror(errno)));
  auto check = [&](bool ok) {
    if (!ok) throw Error(fmt::format("save_safetensors: writing '{}' failed: {}", temp_path, std::strerror(errno)));
  };
  check(file.write(plan.prefix.data(), plan.prefix.size()));
  for (size_t i : plan.order) {
    const Tensor host = host_contiguous(tensors[i].second);  // one tensor at a time on the host
    check(file.write(host.data_ptr(), host.nbytes()));
  }
  if (!file.commit(path))
    throw Error(fmt::format("save_safetensors: finishing '{}' failed: {}", path, std::strerror(errno)));
}

SafetensorsContents from_safetensors_bytes(std::span<const uint8_t> bytes) {
  return read_safetensors("from_safetensors_bytes", bytes.size(), [&](uint64_t offset, void* dst, uint64_t n) {
    std::memcpy(dst, bytes.data() + offset, n);  // read_safetensors only asks for checked ranges
  });
}

namespace {

// Opens path and calls use(ctx, total, read) with a reader of its bytes, as read_header takes it.
template <class Use>
auto with_file_reader(const char* op, const std::string& path, Use&& use) {
  const std::string ctx = fmt::format("{}: '{}'", op, path);
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::is_regular_file(status))
    throw Error(fmt::format("{}: not a readable file{}", ctx, ec ? ": " + ec.message() : ""));
  const uint64_t total = std::filesystem::file_size(path, ec);
  if (ec) throw Error(fmt::format("{}: cannot get its size: {}", ctx, ec.message()));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) throw Error(fmt::format("{}: cannot open: {}", ctx, std::strerror(errno)));
  return use(ctx, total, [&](uint64_t offset, void* dst, uint64_t n) {
    if (fseeko(file.get(), static_cast<off_t>(offset), SEEK_SET) != 0)
      throw Error(fmt::format("{}: cannot seek to byte {}: {}", ctx, offset, std::strerror(errno)));
    const size_t got = std::fread(dst, 1, n, file.get());
    if (got != n)
      throw Error(fmt::format("{}: reading {} bytes at offset {} got only {}; did the file change while loading?",
                              ctx, n, offset, got));
  });
}

}  // namespace

SafetensorsContents load_safetensors(const std::string& path) {
  return with_file_reader("load_safetensors", path, [](const std::string& ctx, uint64_t total, auto&& read) {
    return read_safetensors(ctx, total, read);
  });
}

int64_t SafetensorsHeader::element_count() const {
  int64_t count = 0;
  for (const SafetensorsEntry& e : tensors) count += shape_numel(e.shape, "SafetensorsHeader::element_count");
  return count;
}

SafetensorsHeader load_safetensors_header(const std::string& path) {
  return with_file_reader("load_safetensors_header", path, [](const std::string& ctx, uint64_t total, auto&& read) {
    SafetensorsHeader header;
    uint64_t data_start = 0;
    for (const Entry& e : read_header(ctx, total, read, header.metadata, data_start))
      header.tensors.push_back({e.name, e.dtype, e.shape, data_start + e.begin});
    return header;
  });
}

Tensor read_safetensors_elements(const std::string& path, const SafetensorsEntry& entry, int64_t first, int64_t count) {
  const int64_t numel = shape_numel(entry.shape, "read_safetensors_elements");
  if (first < 0 || count < 0 || first > numel || count > numel - first)
    throw Error(fmt::format("read_safetensors_elements: '{}': tensor '{}' has {} elements; elements [{}, {} + {}) "
                            "are outside it",
                            path, entry.name, numel, first, first, count));
  return with_file_reader("read_safetensors_elements", path, [&](const std::string& ctx, uint64_t total, auto&& read) {
    const uint64_t size = dtype_size(entry.dtype);
    const uint64_t begin = entry.file_offset + static_cast<uint64_t>(first) * size;
    const uint64_t bytes = static_cast<uint64_t>(count) * size;
    if (begin > total || bytes > total - begin)
      throw Error(fmt::format("{}: tensor '{}': bytes [{}, {}) run past the end of the {}-byte file; did the file "
                              "change since its header was read?",
                              ctx, entry.name, begin, begin + bytes, total));
    Tensor out = empty({count}, entry.dtype);
    if (bytes > 0) read(begin, out.data_ptr(), bytes);
    if (entry.dtype == DType::boolean)
      for (int64_t i = 0; i < count; ++i)
        if (static_cast<const uint8_t*>(out.data_ptr())[i] > 1)
          throw Error(fmt::format("{}: tensor '{}': BOOL element {} is not 0 or 1", ctx, entry.name, first + i));
    return out;
  });
}

}  // namespace accel
