// The bytes of a checkpoint's model.safetensors, checked against the safetensors format that Python's
// safetensors and PyTorch read: an 8-byte little-endian header length, a JSON header with each
// tensor's dtype, shape and data offsets (contiguous, in order, covering the data exactly) and the
// "pt" format metadata, and the model's own parameter names.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "accel.h"

using namespace accel;

TEST_CASE("a checkpoint's model.safetensors is the safetensors format, with the model's parameter names") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "accel_test_checkpoint_format";
  std::filesystem::remove_all(dir);
  AcceleratorOptions o;
  o.print_settings = false;
  Accelerator accelerator(o);
  Generator gen(0);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(3, 5, true, gen));
  model->push_back(std::make_shared<nn::LayerNorm>(5));
  auto net = accelerator.prepare(model);
  accelerator.save_state(dir.string());

  std::ifstream in(dir / "model.safetensors", std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(bytes.size() > 8);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = header_size << 8 | bytes[static_cast<size_t>(i)];  // little-endian
  REQUIRE(8 + header_size <= bytes.size());
  const nlohmann::json header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + header_size);
  REQUIRE(header.is_object());
  CHECK(header.at("__metadata__").at("format") == "pt");
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  std::set<std::string> names;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    names.insert(name);
    CHECK(entry.at("dtype") == "F32");
    uint64_t count = 1;
    for (const auto& d : entry.at("shape")) count *= d.get<uint64_t>();
    const uint64_t begin = entry.at("data_offsets")[0], end = entry.at("data_offsets")[1];
    CHECK(end - begin == count * 4);
    ranges.emplace_back(begin, end);
  }
  CHECK(names == std::set<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"});
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (const auto& [begin, end] : ranges) {
    CHECK(begin == at);  // no gaps, no overlaps
    at = end;
  }
  CHECK(8 + header_size + at == bytes.size());  // the data section is exactly the tensors
  std::filesystem::remove_all(dir);
}
