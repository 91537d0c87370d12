// libFuzzer harness for the places of the pieces in per-rank shard files (their "accel_pieces"
// metadata): the input, cut at its first NUL, is that metadata of two shard files of fixed tensors.
// open_state_shards either opens them or throws accel::Error (any other exception, a crash or a
// sanitizer report is a finding); what opens holds each full tensor whole, and every run of one reads
// as those elements of the whole.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_check.h"
#include "kernels/error.h"
#include "runtime/checkpoint/state_shard_files.h"
#include "runtime/safetensors.h"
#include "tensor/creation.h"
#include "tensor/nograd/views.h"

namespace {

namespace fs = std::filesystem;

// One directory per process, written over by every input.
const fs::path& shard_dir() {
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / ("accel_fuzz_state_shards_" + std::to_string(getpid()));
    fs::create_directories(d);
    std::ofstream(d / accel::state_shard_index_name("model")) << accel::state_shard_index("model", 2);
    return d;
  }();
  return dir;
}

// Part 0 holds pieces "a" (3 elements) and "m" (2 x 2) and a whole tensor "w"; part 1 "b" (4) and
// "n" (1 x 2). Their values are their element indices plus 10 per tensor, so a read shows where
// each element came from.
void write_parts(const std::string& pieces0, const std::string& pieces1) {
  auto values = [](int64_t base, const accel::Shape& shape) {
    return accel::nograd::view(accel::arange(static_cast<double>(base), static_cast<double>(base + accel::shape_numel(shape)), 1.0,
                                             accel::DType::f32),
                               shape);
  };
  accel::save_safetensors((shard_dir() / accel::state_shard_file_name("model", 0, 2)).string(),
                          {{"a", values(0, {3})}, {"m", values(10, {2, 2})}, {"w", values(20, {2})}},
                          {{"accel_pieces", pieces0}});
  accel::save_safetensors((shard_dir() / accel::state_shard_file_name("model", 1, 2)).string(),
                          {{"b", values(30, {4})}, {"n", values(40, {1, 2})}}, {{"accel_pieces", pieces1}});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t cut = std::min(input.find('\0'), input.size());
  try {
    write_parts(input.substr(0, cut), cut < input.size() ? input.substr(cut + 1) : std::string("{}"));
  } catch (const accel::Error&) {
    return 0;  // metadata the writer refuses (not UTF-8) is not what this harness reads
  }
  std::unique_ptr<accel::StateReader> reader;
  try {
    reader = accel::open_state_shards(shard_dir(), "model");
  } catch (const accel::Error&) {
    return 0;
  }
  for (size_t i = 0; i < reader->entries().size(); ++i) {
    const accel::StateEntry& entry = reader->entries()[i];
    const int64_t numel = accel::shape_numel(entry.shape);
    FUZZ_CHECK(numel >= 0 && numel <= 15);  // each element once, from the files' 15 at most
    const accel::Tensor whole = accel::nograd::contiguous(reader->read_whole(i));
    FUZZ_CHECK(whole.shape() == entry.shape && whole.dtype() == entry.dtype);
    const std::vector<float> all = accel::nograd::view(whole, {numel}).to_vector<float>();
    for (int64_t first = 0; first <= numel; ++first)
      for (int64_t count = 0; first + count <= numel; ++count) {
        const std::vector<float> run = accel::nograd::contiguous(reader->read(i, first, count)).to_vector<float>();
        FUZZ_CHECK(std::equal(run.begin(), run.end(), all.begin() + first, all.begin() + first + count));
      }
    try {
      (void)reader->read(i, numel, 1);  // past the end
      FUZZ_CHECK(false);
    } catch (const accel::Error&) {
    }
  }
  return 0;
}
