// safetensors I/O: files from the reference writer load exactly, our writer matches its bytes, every dtype
// round-trips, and every malformed file we can think of is refused with a message, never a crash.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "accel.h"
#include "tensor/nograd/views.h"
#include "../temp_dir.h"

using namespace accel;
namespace fs = std::filesystem;
using test::TempDir;

namespace {

std::vector<uint8_t> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open ", path.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

fs::path fixture(const std::string& name) { return fs::path(ACCEL_TEST_FIXTURES_DIR) / name; }

SafetensorsContents load_fixture(const std::string& name) { return load_safetensors(fixture(name).string()); }

// A fresh directory under the system temp dir, removed at the end of the test.
// The elements' bytes in row-major order: an exact comparison for every dtype, NaN payloads included.
std::vector<uint8_t> bytes_of(const Tensor& t) {
  Tensor c = nograd::contiguous(t);
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return std::vector<uint8_t>(p, p + c.nbytes());
}

template <class H>
std::vector<uint16_t> bits_of(const Tensor& t) {
  std::vector<uint16_t> out;
  for (H h : t.to_vector<H>()) out.push_back(h.bits);
  return out;
}

// --- a byte-level writer that follows the spec on its own, sharing no code with accel's writer ---

void put_le(std::vector<uint8_t>& out, uint64_t value, int nbytes) {
  for (int i = 0; i < nbytes; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

// 8-byte little-endian length (claimed_length, normally the header's size), the header, then data.
std::vector<uint8_t> st_file(const std::string& header, const std::vector<uint8_t>& data, uint64_t claimed_length) {
  std::vector<uint8_t> out;
  put_le(out, claimed_length, 8);
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<uint8_t> st_file(const std::string& header, const std::vector<uint8_t>& data = {}) {
  return st_file(header, data, header.size());
}

std::vector<uint8_t> f32_le(std::initializer_list<float> values) {
  std::vector<uint8_t> out;
  for (float v : values) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    put_le(out, u, 4);
  }
  return out;
}

// One tensor 'x' of the given dtype/shape/offsets text, with data_size zero bytes of data.
std::vector<uint8_t> one_tensor(const std::string& entry, size_t data_size) {
  return st_file("{\"x\":" + entry + "}", std::vector<uint8_t>(data_size, 0));
}

// A tensor of dtype and shape whose bytes are a pattern (0/1 for bool), so every bit is checked.
Tensor patterned(DType dtype, const Shape& shape, uint8_t seed) {
  Tensor t = empty(shape, dtype);
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  for (size_t i = 0; i < t.nbytes(); ++i)
    p[i] = dtype == DType::boolean ? static_cast<uint8_t>((i * 7 + seed) % 3 == 0) : static_cast<uint8_t>(i * 37 + seed);
  return t;
}

// doctest compares messages as its own String.
doctest::String message(const std::string& text) { return doctest::String(text.c_str()); }

}  // namespace

TEST_CASE("fixtures from the reference writer load with their exact values, one per dtype") {
  const auto f64 = load_fixture("f64.safetensors");
  REQUIRE(f64.tensors.size() == 1);
  CHECK(f64.tensors[0].first == "x");
  const Tensor& x64 = f64.tensors[0].second;
  CHECK(x64.dtype() == DType::f64);
  CHECK(x64.shape() == Shape{2, 3});
  CHECK(x64.to_vector<double>() ==
        std::vector<double>{0.0, 1.5, -2.25, 1e-300, 3.141592653589793, -std::numeric_limits<double>::infinity()});

  const Tensor x32 = load_fixture("f32.safetensors").at("x");
  CHECK(x32.dtype() == DType::f32);
  CHECK(x32.shape() == Shape{2, 2});
  CHECK(x32.to_vector<float>() == std::vector<float>{1.0f, -0.5f, 0.1f, std::numeric_limits<float>::max()});

  const Tensor x16 = load_fixture("f16.safetensors").at("x");
  CHECK(x16.dtype() == DType::f16);
  CHECK(x16.shape() == Shape{7});
  CHECK(bits_of<Half>(x16) == std::vector<uint16_t>{0x3C00, 0xC000, 0x7BFF, 0x0001, 0x7C00, 0x2E66, 0x8000});
  CHECK(static_cast<float>(x16.to_vector<Half>()[2]) == 65504.0f);

  const Tensor xb16 = load_fixture("bf16.safetensors").at("x");
  CHECK(xb16.dtype() == DType::bf16);
  CHECK(xb16.shape() == Shape{3, 2});
  CHECK(bits_of<BFloat16>(xb16) == std::vector<uint16_t>{0x3F80, 0xC040, 0x7F7F, 0x0001, 0xFF80, 0x3DCD});
  CHECK(static_cast<float>(xb16.to_vector<BFloat16>()[1]) == -3.0f);

  const Tensor xi64 = load_fixture("i64.safetensors").at("x");
  CHECK(xi64.dtype() == DType::i64);
  CHECK(xi64.to_vector<int64_t>() == std::vector<int64_t>{0, -1, std::numeric_limits<int64_t>::max(),
                                                          std::numeric_limits<int64_t>::min(), 42});

  const Tensor xi32 = load_fixture("i32.safetensors").at("x");
  CHECK(xi32.dtype() == DType::i32);
  CHECK(xi32.shape() == Shape{2, 2});
  CHECK(xi32.to_vector<int32_t>() ==
        std::vector<int32_t>{1, -2, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()});

  const Tensor xb = load_fixture("bool.safetensors").at("x");
  CHECK(xb.dtype() == DType::boolean);
  CHECK(xb.to_vector<bool>() == std::vector<bool>{true, false, false, true});

  for (const Tensor& t : {x64, x32, x16, xb16, xi64, xi32, xb}) {
    CHECK(t.device() == Device::cpu());
    CHECK(t.is_contiguous());
    CHECK_FALSE(t.requires_grad());
  }
}

TEST_CASE("the metadata fixture keeps escapes and non-ASCII text") {
  const auto file = load_fixture("metadata.safetensors");
  CHECK(file.metadata == SafetensorsMetadata{{"format", "pt"}, {"note", "h\u00e9llo \"quoted\"\n\ttab"}, {"empty", ""}});
  CHECK(file.at("w").to_vector<float>() == std::vector<float>{2.0f, 4.0f});
  CHECK_THROWS_WITH_AS(file.at("v"), "SafetensorsContents::at: no tensor named 'v' among the 1 tensors [w]", Error);
}

TEST_CASE("the multi-tensor fixture loads in file order, with a 0-d and an empty tensor") {
  const auto file = load_fixture("multi.safetensors");
  std::vector<std::string> names;
  for (const auto& [name, t] : file.tensors) names.push_back(name);
  // The reference wrote them by dtype (I64, F64, F32, I32, BF16, F16, BOOL), then name.
  CHECK(names == std::vector<std::string>{"step", "scale", "a.bias", "b.weight", "empty", "idx", "emb", "half", "mask"});
  CHECK(file.metadata == SafetensorsMetadata{{"format", "pt"}});
  const Tensor& step = file.at("step");
  CHECK(step.dim() == 0);
  CHECK(step.to_vector<int64_t>() == std::vector<int64_t>{7});
  CHECK(file.at("scale").to_vector<double>() == std::vector<double>{0.125});
  CHECK(file.at("a.bias").to_vector<float>() == std::vector<float>{-1, 0, 1});
  CHECK(file.at("b.weight").shape() == Shape{2, 3});
  CHECK(file.at("b.weight").to_vector<float>() == std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f});
  CHECK(file.at("empty").shape() == Shape{0, 4});
  CHECK(file.at("empty").numel() == 0);
  CHECK(file.at("idx").to_vector<int32_t>() == std::vector<int32_t>{3, 1});
  CHECK(bits_of<BFloat16>(file.at("emb")) == std::vector<uint16_t>{0x3F80, 0x4000, 0x4040, 0x4080});
  CHECK(bits_of<Half>(file.at("half")) == std::vector<uint16_t>{0x3800, 0xB400});
  CHECK(file.at("mask").to_vector<bool>() == std::vector<bool>{true, false, true});
}

TEST_CASE("accel writes the reference's bytes for the same tensors, in any input order") {
  // metadata.safetensors is left out: the reference writes metadata keys in hash order.
  for (const char* name : {"f64.safetensors", "f32.safetensors", "f16.safetensors", "bf16.safetensors",
                           "i64.safetensors", "i32.safetensors", "bool.safetensors", "multi.safetensors"}) {
    CAPTURE(name);
    const std::vector<uint8_t> reference = read_file(fixture(name));
    auto file = from_safetensors_bytes(reference);
    CHECK(to_safetensors_bytes(file.tensors, file.metadata) == reference);
    std::reverse(file.tensors.begin(), file.tensors.end());
    CHECK(to_safetensors_bytes(file.tensors, file.metadata) == reference);
  }
}

TEST_CASE("the reference's own serialisation examples, byte for byte") {
  // From safetensors/src/tensor.rs: test_empty and test_serialization.
  CHECK(to_safetensors_bytes({}) == std::vector<uint8_t>{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '});
  const std::string header = R"({"__metadata__":{"framework":"pt"}})";
  std::vector<uint8_t> expected = st_file(header + "     ");
  CHECK(to_safetensors_bytes({}, {{"framework", "pt"}}) == expected);
  const std::string attn = R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  expected = st_file(attn, f32_le({0, 1, 2, 3, 4, 5}));
  CHECK(expected.size() % 8 == 0);  // this header happens to need no padding
  CHECK(to_safetensors_bytes({{"attn.0", from_vector<float>({0, 1, 2, 3, 4, 5}, {1, 2, 3})}}) == expected);
}

TEST_CASE("the reference's fixtures fail cleanly for dtypes accel does not hold") {
  CHECK_THROWS_WITH_AS(load_fixture("unsupported_u8.safetensors"),
                       doctest::Contains("unsupported_u8.safetensors': tensor 'pixels': dtype \"U8\" is not supported "
                                         "by accel (it reads F64, F32, F16, BF16, I64, I32, BOOL, F8_E4M3, F8_E5M2)"),
                       Error);
}

TEST_CASE("the reference's F8_E4M3 fixture (numpy float8_e4m3fn, once unsupported) loads as f8_e4m3") {
  // Its file name predates accel's fp8 dtypes; it holds 0x38 and 0x40, which E4M3FN defines as 1 and 2.
  const Tensor w8 = load_fixture("unsupported_f8_e4m3.safetensors").at("w8");
  CHECK(w8.dtype() == DType::f8_e4m3);
  CHECK(to_dtype(w8, DType::f32).to_vector<float>() == std::vector<float>{1.0f, 2.0f});
}

TEST_CASE("every dtype round-trips through a file and through bytes, whatever the layout") {
  TempDir dir("safetensors");
  for (DType dtype : kAllDTypes) {
    CAPTURE(dtype_name(dtype));
    const Tensor base = patterned(dtype, {3, 4}, static_cast<uint8_t>(dtype) + 1);
    NamedTensors tensors = {
        {"plain", base},
        {"transposed", nograd::transpose(base, 0, 1)},                  // non-contiguous
        {"column", nograd::narrow(base, 1, 1, 2)},                      // non-contiguous with an offset
        {"broadcast", nograd::expand(nograd::narrow(base, 0, 1, 1), {5, 4})},  // stride 0
        {"scalar", nograd::select(nograd::select(base, 0, 2), 0, 3)},     // 0-d view at an offset
        {"empty", empty({0, 3}, dtype)},
        {"empty_3d", empty({2, 0, 5}, dtype)},
    };
    const SafetensorsMetadata metadata = {{"dtype", dtype_name(dtype)}, {"unicode \u00e9\u4e2d", "tab\there"}, {"", ""}};
    const fs::path path = dir.path / fmt::format("{}.safetensors", dtype_name(dtype));
    save_safetensors(path.string(), tensors, metadata);
    CHECK_FALSE(fs::exists(path.string() + ".tmp"));
    const std::vector<uint8_t> bytes = to_safetensors_bytes(tensors, metadata);
    CHECK(read_file(path) == bytes);
    // The header is padded so that data starts on an 8-byte boundary.
    uint64_t header_length = 0;
    for (int i = 7; i >= 0; --i) header_length = header_length << 8 | bytes[i];
    CHECK(header_length % 8 == 0);

    for (const SafetensorsContents& loaded : {load_safetensors(path.string()), from_safetensors_bytes(bytes)}) {
      CHECK(loaded.metadata == metadata);
      REQUIRE(loaded.tensors.size() == tensors.size());
      for (const auto& [name, original] : tensors) {
        CAPTURE(name);
        const Tensor& t = loaded.at(name);
        CHECK(t.dtype() == dtype);
        CHECK(t.shape() == original.shape());
        CHECK(t.strides() == contiguous_strides(t.shape()));
        CHECK(bytes_of(t) == bytes_of(original));
      }
    }
  }
}

TEST_CASE("mixed dtypes are stored largest element first, so each tensor is aligned in the file") {
  NamedTensors tensors;
  int i = 0;
  for (DType dtype : kAllDTypes) tensors.emplace_back(fmt::format("t{}", i++), patterned(dtype, {3}, 1));
  const std::vector<uint8_t> bytes = to_safetensors_bytes(tensors);
  const auto loaded = from_safetensors_bytes(bytes);
  std::vector<DType> order;
  for (const auto& [name, t] : loaded.tensors) order.push_back(t.dtype());
  CHECK(order == std::vector<DType>{DType::i64, DType::f64, DType::f32, DType::i32, DType::bf16, DType::f16,
                                    DType::f8_e4m3, DType::f8_e5m2, DType::boolean});
  size_t offset = 0;
  for (const auto& [name, t] : loaded.tensors) {
    CHECK(offset % dtype_size(t.dtype()) == 0);
    offset += t.nbytes();
  }
}

TEST_CASE("a file written byte by byte from the spec loads: any key order, unpadded, whitespace, extra fields") {
  // 'b' comes first in the header but second in the data; 'a' has an unknown field, which the reference ignores.
  const std::string header =
      " \n{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
      "\"__metadata__\":{\"k\":\"v\"},"
      "\"a\":{\"shape\":[2,1],\"data_offsets\":[0,8],\"dtype\":\"I32\",\"note\":[1,{\"x\":null}]},"
      "\"z\":{\"dtype\":\"BOOL\",\"shape\":[0],\"data_offsets\":[16,16]}}\r\n\t ";
  std::vector<uint8_t> data;
  put_le(data, static_cast<uint32_t>(-5), 4);
  put_le(data, 6, 4);
  const std::vector<uint8_t> b = f32_le({0.25f, -8.0f});
  data.insert(data.end(), b.begin(), b.end());
  const auto file = from_safetensors_bytes(st_file(header, data));
  REQUIRE(file.tensors.size() == 3);
  CHECK(file.tensors[0].first == "a");
  CHECK(file.tensors[1].first == "b");
  CHECK(file.tensors[2].first == "z");
  CHECK(file.at("a").shape() == Shape{2, 1});
  CHECK(file.at("a").to_vector<int32_t>() == std::vector<int32_t>{-5, 6});
  CHECK(file.at("b").to_vector<float>() == std::vector<float>{0.25f, -8.0f});
  CHECK(file.at("z").shape() == Shape{0});
  CHECK(file.metadata == SafetensorsMetadata{{"k", "v"}});

  const std::string deep = "{\"x\":{\"dtype\":\"BOOL\",\"shape\":[0],\"data_offsets\":[0,0],\"deep\":" +
                           std::string(100, '[') + std::string(100, ']') + "}}";
  CHECK(from_safetensors_bytes(st_file(deep)).tensors.size() == 1);
  // The smallest files: no tensors, and a null __metadata__ (which the reference reads as none).
  CHECK(from_safetensors_bytes(st_file("{}")).tensors.empty());
  CHECK(from_safetensors_bytes(st_file(R"({"__metadata__":null})")).metadata.empty());
  // The reference's test_zero_sized_tensor and test_empty_shapes_allowed.
  CHECK(from_safetensors_bytes(one_tensor(R"({"dtype":"I32","shape":[2,0],"data_offsets":[0, 0]})", 0))
            .at("x").shape() == Shape{2, 0});
  CHECK(from_safetensors_bytes(one_tensor(R"({"dtype":"I32","shape":[],"data_offsets":[0,4]})", 4))
            .at("x").to_vector<int32_t>() == std::vector<int32_t>{0});
}

TEST_CASE("a file cut short at any byte is refused with a message") {
  const std::vector<uint8_t> valid = to_safetensors_bytes(
      {{"w", from_vector<float>({1, 2, 3, 4}, {2, 2})}, {"n", from_vector<int64_t>({9})}}, {{"m", "x"}});
  REQUIRE_NOTHROW(from_safetensors_bytes(valid));
  for (size_t size = 0; size < valid.size(); ++size) {
    CAPTURE(size);
    CHECK_THROWS_AS(from_safetensors_bytes(std::span<const uint8_t>(valid.data(), size)), Error);
  }
  std::vector<uint8_t> longer = valid;
  longer.push_back(0);
  CHECK_THROWS_WITH_AS(from_safetensors_bytes(longer),
                       "from_safetensors_bytes: the tensors cover 24 bytes of the 25-byte data buffer; the last 1 "
                       "bytes are unused",
                       Error);
  CHECK_THROWS_WITH_AS(from_safetensors_bytes(std::span<const uint8_t>(valid.data(), 5)),
                       "from_safetensors_bytes: 5 bytes is too short for a safetensors file, which starts with an "
                       "8-byte header length",
                       Error);
  CHECK_THROWS_WITH_AS(from_safetensors_bytes(std::span<const uint8_t>(valid.data(), valid.size() - 1)),
                       "from_safetensors_bytes: tensor 'w': data_offsets [8, 24] run past the end of the 23-byte "
                       "data buffer",
                       Error);

  TempDir dir("safetensors");
  const fs::path path = dir.path / "cut.safetensors";
  write_file(path, std::vector<uint8_t>(valid.begin(), valid.begin() + 40));
  CHECK_THROWS_WITH_AS(load_safetensors(path.string()),
                       message(fmt::format("load_safetensors: '{}': header length {} runs past the end of the 40-byte file",
                                           path.string(), valid[0] | valid[1] << 8)),
                       Error);
}

TEST_CASE("header lengths past the file or past the 100 MB limit are refused before anything is read") {
  CHECK_THROWS_WITH_AS(from_safetensors_bytes(st_file("{}", {}, 3)),
                       "from_safetensors_bytes: header length 3 runs past the end of the 10-byte file", Error);
  CHECK_THROWS_WITH_AS(from_safetensors_bytes(st_file("{}", {}, 100'000'001)),
                       "from_safetensors_bytes: header length 100000001 exceeds the limit of 100000000 bytes", Error);
  CHECK_THROWS_WITH_AS(from_safetensors_bytes(st_file("{}", {}, std::numeric_limits<uint64_t>::max())),
                       "from_safetensors_bytes: header length 18446744073709551615 exceeds the limit of 100000000 "
                       "bytes",
                       Error);
  // The reference's test_header_too_large bytes.
  CHECK_THROWS_WITH_AS(from_safetensors_bytes(st_file("{}", {}, 0xffffff000000003cull)),
                       doctest::Contains("exceeds the limit of 100000000 bytes"), Error);
  CHECK_THROWS_WITH_AS(from_safetensors_bytes(st_file("")),
                       doctest::Contains("from_safetensors_bytes: header is not valid JSON"), Error);
}

TEST_CASE("headers that are not a JSON object of well-formed entries are refused") {
  auto bad = [](const std::string& header, size_t data_size = 0) {
    return from_safetensors_bytes(st_file(header, std::vector<uint8_t>(data_size, 0)));
  };
  CHECK_THROWS_WITH_AS(bad("{"), doctest::Contains("from_safetensors_bytes: header is not valid JSON: parse error"), Error);
  CHECK_THROWS_WITH_AS(bad("{} x"), doctest::Contains("header is not valid JSON"), Error);
  CHECK_THROWS_WITH_AS(bad("{\"\xff\":1}"), doctest::Contains("header is not valid JSON"), Error);  // not UTF-8
  // nlohmann would stop at a NUL as if the input ended there; the reference refuses it, and so do we.
  CHECK_THROWS_WITH_AS(bad(std::string("{}\0 ", 4)),
                       "from_safetensors_bytes: header is not valid JSON: it holds a NUL byte at offset 2", Error);
  CHECK_THROWS_WITH_AS(bad("{\"x\":" + std::string(200, '[') + std::string(200, ']') + "}"),
                       "from_safetensors_bytes: header nests deeper than 128 levels", Error);
  CHECK_THROWS_WITH_AS(bad("[1,2]"), "from_safetensors_bytes: header must be a JSON object, got [1,2]", Error);
  CHECK_THROWS_WITH_AS(bad(R"({"x":[1]})"),
                       "from_safetensors_bytes: tensor 'x': expected an object with dtype, shape and data_offsets, "
                       "got [1]",
                       Error);
  CHECK_THROWS_WITH_AS(bad(R"({"x":{"dtype":"F32","shape":[1]}})"),
                       "from_safetensors_bytes: tensor 'x': missing field 'data_offsets'", Error);
  CHECK_THROWS_WITH_AS(bad(R"({"x":{"shape":[1],"data_offsets":[0,4]}})"),
                       "from_safetensors_bytes: tensor 'x': missing field 'dtype'", Error);
  CHECK_THROWS_WITH_AS(bad(R"({"x":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})", 4),
                       "from_safetensors_bytes: tensor 'x': dtype must be a string, got 32", Error);
  CHECK_THROWS_WITH_AS(bad(R"({"x":{"dtype":"FOO","shape":[1],"data_offsets":[0,4]}})", 4),
                       "from_safetensors_bytes: tensor 'x': dtype \"FOO\" is not supported by accel (it reads F64, "
                       "F32, F16, BF16, I64, I32, BOOL, F8_E4M3, F8_E5M2)",
                       Error);
  CHECK_THROWS_WITH_AS(bad(R"({"x":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", 4),
                       doctest::Contains("dtype \"f32\" is not supported"), Error);
  CHECK_THROWS_WITH_AS(bad(R"({"x":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})", 8),
                       "from_safetensors_bytes: tensor 'x': shape must be an array of non-negative integers, got \"2\"",
                       Error);
  CHECK_THROWS_WITH_AS(bad(R"({"__metadata__":["a"]})"),
                       "from_safetensors_bytes: __metadata__ must be an object of strings, got [\"a\"]", Error);
  CHECK_THROWS_WITH_AS(bad(R"({"__metadata__":{"epoch":3}})"),
                       "from_safetensors_bytes: __metadata__ entry 'epoch' must be a string, got 3", Error);
}

TEST_CASE("negative, fractional and huge shapes are refused, and sizes never overflow") {
  auto shape_error = [](const std::string& shape, const std::string& offsets = "[0,0]") {
    return from_safetensors_bytes(
        one_tensor(R"({"dtype":"F32","shape":)" + shape + R"(,"data_offsets":)" + offsets + "}", 0));
  };
  const doctest::String x = "from_safetensors_bytes: tensor 'x': ";
  CHECK_THROWS_WITH_AS(shape_error("[2,-1]"),
                       x + "shape entry 1 is -1; expected a non-negative integer below 2^63", Error);
  CHECK_THROWS_WITH_AS(shape_error("[2.0]"), x + "shape entry 0 is 2.0; expected a non-negative integer below 2^63",
                       Error);
  CHECK_THROWS_WITH_AS(shape_error("[\"3\"]"),
                       x + "shape entry 0 is \"3\"; expected a non-negative integer below 2^63", Error);
  CHECK_THROWS_WITH_AS(shape_error("[9223372036854775808]"),
                       x + "shape entry 0 is 9223372036854775808; expected a non-negative integer below 2^63", Error);
  CHECK_THROWS_WITH_AS(shape_error("[99999999999999999999]"),  // beyond u64: JSON reads it as a float
                       doctest::Contains("shape entry 0 is 1e+20; expected a non-negative integer"), Error);
  // The reference's test_validation_overflow shapes, and overflows hidden behind a zero dim.
  CHECK_THROWS_WITH_AS(shape_error("[2,9223372036854775807]", "[0,16]"),
                       x + "shape [2,9223372036854775807] of F32 is too large: its size overflows 64 bits", Error);
  CHECK_THROWS_WITH_AS(shape_error("[4611686018427387904,4]"),
                       x + "shape [4611686018427387904,4] of F32 is too large: its size overflows 64 bits", Error);
  CHECK_THROWS_WITH_AS(shape_error("[0,4294967296,4294967296]"),
                       doctest::Contains("is too large: its size overflows 64 bits"), Error);
  // A zero dim next to a large one is a legal empty tensor.
  CHECK(shape_error("[0,4611686018427387904]").at("x").numel() == 0);
}

TEST_CASE("offsets out of range, overlapping, with gaps, or not covering the buffer are refused") {
  auto offsets_error = [](const std::string& header, size_t data_size) {
    return from_safetensors_bytes(st_file(header, std::vector<uint8_t>(data_size, 0)));
  };
  const std::string f32x2 = R"("dtype":"F32","shape":[2],"data_offsets":)";
  const doctest::String x = "from_safetensors_bytes: tensor 'x': ";
  CHECK_THROWS_WITH_AS(offsets_error("{\"x\":{" + f32x2 + "[0]}}", 8),
                       x + "data_offsets must be [begin, end] with non-negative integers, got [0]", Error);
  CHECK_THROWS_WITH_AS(offsets_error("{\"x\":{" + f32x2 + "[0,8,16]}}", 8),
                       x + "data_offsets must be [begin, end] with non-negative integers, got [0,8,16]", Error);
  CHECK_THROWS_WITH_AS(offsets_error("{\"x\":{" + f32x2 + "[-8,0]}}", 8),
                       x + "data_offsets must be [begin, end] with non-negative integers, got [-8,0]", Error);
  CHECK_THROWS_WITH_AS(offsets_error("{\"x\":{" + f32x2 + "{\"begin\":0}}}", 8),
                       doctest::Contains("data_offsets must be [begin, end] with non-negative integers"), Error);
  CHECK_THROWS_WITH_AS(offsets_error("{\"x\":{" + f32x2 + "[8,0]}}", 8), x + "data_offsets [8, 0] end before they begin",
                       Error);
  // The reference's test_invalid_info: the size does not match dtype x shape.
  CHECK_THROWS_WITH_AS(offsets_error("{\"x\":{" + f32x2 + "[0,4]}}", 4),
                       x + "data_offsets [0, 4] hold 4 bytes, but F32 [2] needs 8", Error);
  CHECK_THROWS_WITH_AS(offsets_error("{\"x\":{" + f32x2 + "[0,8]}}", 4),
                       x + "data_offsets [0, 8] run past the end of the 4-byte data buffer", Error);
  CHECK_THROWS_WITH_AS(offsets_error("{\"x\":{" + f32x2 + "[18446744073709551608,18446744073709551616]}}", 8),
                       doctest::Contains("data_offsets must be [begin, end] with non-negative integers"), Error);
  CHECK_THROWS_WITH_AS(offsets_error("{\"x\":{" + f32x2 + "[9223372036854775800,9223372036854775808]}}", 8),
                       doctest::Contains("data_offsets must be [begin, end] with non-negative integers"), Error);
  CHECK_THROWS_WITH_AS(offsets_error("{\"x\":{" + f32x2 + "[8,16]}}", 16),
                       x + "data_offsets [8, 16] leave bytes [0, 8) of the data buffer unused", Error);
  CHECK_THROWS_WITH_AS(offsets_error("{\"a\":{" + f32x2 + "[0,8]},\"x\":{" + f32x2 + "[12,20]}}", 20),
                       x + "data_offsets [12, 20] leave bytes [8, 12) of the data buffer unused", Error);
  CHECK_THROWS_WITH_AS(offsets_error("{\"a\":{" + f32x2 + "[0,8]},\"x\":{" + f32x2 + "[4,12]}}", 12),
                       x + "data_offsets [4, 12] overlap tensor 'a' at [0, 8]", Error);
  // The reference's test_json_attack: many tensors claiming the same bytes.
  CHECK_THROWS_WITH_AS(offsets_error("{\"a\":{" + f32x2 + "[0,8]},\"x\":{" + f32x2 + "[0,8]}}", 8),
                       x + "data_offsets [0, 8] overlap tensor 'a' at [0, 8]", Error);
  CHECK_THROWS_WITH_AS(offsets_error("{\"x\":{" + f32x2 + "[0,8]}}", 10),
                       "from_safetensors_bytes: the tensors cover 8 bytes of the 10-byte data buffer; the last 2 bytes "
                       "are unused",
                       Error);
  CHECK_THROWS_WITH_AS(offsets_error("{}", 3),
                       "from_safetensors_bytes: the tensors cover 0 bytes of the 3-byte data buffer; the last 3 bytes "
                       "are unused",
                       Error);
}

TEST_CASE("duplicate keys anywhere in the header are refused") {
  const std::string t = R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  const std::string u = R"({"dtype":"F32","shape":[1],"data_offsets":[4,8]})";
  CHECK_THROWS_WITH_AS(from_safetensors_bytes(st_file("{\"w\":" + t + ",\"w\":" + u + "}", std::vector<uint8_t>(8))),
                       "from_safetensors_bytes: header has the key 'w' twice", Error);
  CHECK_THROWS_WITH_AS(
      from_safetensors_bytes(st_file(R"({"w":{"dtype":"F32","dtype":"I32","shape":[1],"data_offsets":[0,4]}})",
                                     std::vector<uint8_t>(4))),
      "from_safetensors_bytes: header has the key 'dtype' twice", Error);
  CHECK_THROWS_WITH_AS(from_safetensors_bytes(st_file(R"({"__metadata__":{"a":"1","a":"2"}})")),
                       "from_safetensors_bytes: header has the key 'a' twice", Error);
  CHECK_THROWS_WITH_AS(from_safetensors_bytes(st_file(R"({"__metadata__":{},"__metadata__":{}})")),
                       "from_safetensors_bytes: header has the key '__metadata__' twice", Error);
  // The same key in sibling objects is fine.
  CHECK(from_safetensors_bytes(st_file(R"({"__metadata__":{"dtype":"x"},"dtype":)" + t + "}", std::vector<uint8_t>(4)))
            .tensors.size() == 1);
}

TEST_CASE("bool tensors must hold 0 or 1") {
  std::vector<uint8_t> data = {1, 0, 2};
  CHECK_THROWS_WITH_AS(
      from_safetensors_bytes(st_file(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", data)),
      "from_safetensors_bytes: tensor 'm': BOOL element 2 is byte 0x02; expected 0 or 1", Error);
}

TEST_CASE("a corrupted header byte gives a clean error or a valid file, never anything else") {
  const std::vector<uint8_t> valid = to_safetensors_bytes(
      {{"w", from_vector<float>({1, 2, 3, 4}, {2, 2})}, {"b", from_vector<bool>({true, false})}}, {{"m", "x"}});
  const size_t header_end = 8 + (valid[0] | valid[1] << 8);
  int errors = 0, loads = 0;
  for (size_t pos = 0; pos < header_end; ++pos) {
    for (uint8_t value : {0x00, 0x01, 0x08, 0x22, 0x2c, 0x2d, 0x30, 0x39, 0x5b, 0x5d, 0x7b, 0x7d, 0x80, 0xff}) {
      std::vector<uint8_t> corrupt = valid;
      corrupt[pos] = value;
      try {
        from_safetensors_bytes(corrupt);
        ++loads;
      } catch (const Error&) {
        ++errors;
      }
    }
  }
  CHECK(errors > 0);
  CHECK(errors + loads == static_cast<int>(header_end) * 14);
}

TEST_CASE("the writer refuses what the format cannot hold") {
  const Tensor t = ones({2});
  CHECK_THROWS_WITH_AS(to_safetensors_bytes({{"a", t}, {"a", t}}), "to_safetensors_bytes: tensor name 'a' appears twice",
                       Error);
  CHECK_THROWS_WITH_AS(save_safetensors("unused.safetensors", {{"__metadata__", t}}),
                       "save_safetensors: the name '__metadata__' is reserved for the metadata and cannot name a tensor",
                       Error);
  CHECK_THROWS_WITH_AS(to_safetensors_bytes({{"a", Tensor()}}), "to_safetensors_bytes: tensor 'a' is undefined", Error);
  CHECK_THROWS_WITH_AS(to_safetensors_bytes({{"bad\xff", t}}),
                       doctest::Contains("to_safetensors_bytes: tensor name \"bad"), Error);
  CHECK_THROWS_WITH_AS(to_safetensors_bytes({{"bad\xff", t}}), doctest::Contains("is not valid UTF-8"), Error);
  CHECK_THROWS_WITH_AS(to_safetensors_bytes({{"a", t}}, {{"k", "\xc3"}}),
                       "to_safetensors_bytes: __metadata__ value of 'k' is not valid UTF-8", Error);
  CHECK_FALSE(fs::exists("unused.safetensors"));
}

TEST_CASE("file errors name the path") {
  TempDir dir("safetensors");
  const std::string missing = (dir.path / "missing.safetensors").string();
  CHECK_THROWS_WITH_AS(load_safetensors(missing),
                       doctest::Contains(message(fmt::format("load_safetensors: '{}': not a readable file", missing))), Error);
  CHECK_THROWS_WITH_AS(load_safetensors(dir.path.string()),
                       message(fmt::format("load_safetensors: '{}': not a readable file", dir.path.string())), Error);
  const std::string in_missing_dir = (dir.path / "no" / "such" / "x.safetensors").string();
  CHECK_THROWS_WITH_AS(save_safetensors(in_missing_dir, {{"a", ones({1})}}),
                       message(fmt::format("save_safetensors: cannot open '{}.tmp' for writing: No such file or "
                                           "directory",
                                           in_missing_dir)),
                       Error);
  // A save over an existing file replaces it whole.
  const std::string path = (dir.path / "x.safetensors").string();
  save_safetensors(path, {{"a", ones({100})}});
  save_safetensors(path, {{"b", zeros({1}, DType::i32)}});
  const auto loaded = load_safetensors(path);
  REQUIRE(loaded.tensors.size() == 1);
  CHECK(loaded.tensors[0].first == "b");
}
