// StateReader: a full state read in pieces. Each reader (memory, safetensors files, a checkpoint's
// shard files, one rank's own shard) returns exactly the asked elements of the full tensor, also
// across the pieces of several files; opening shard files checks their coverage from the headers;
// and a range outside an entry, a name in two files, or a run a rank's own shard does not hold is
// refused naming it. A tensor-parallel rank's view of a full state reads only its parts.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include "../counting_state_reader.h"
#include "../error_of.h"
#include "accel.h"
#include "nn/parallel/partition.h"
#include "runtime/checkpoint/state_shard_files.h"
#include "runtime/state_reader.h"
#include "runtime/strategy/tensor_parallel_part_reader.h"
#include "tensor/nograd/views.h"
#include "../temp_dir.h"

using namespace accel;
using test_support::error_of;
namespace fs = std::filesystem;
using test::TempDir;

namespace {

Tensor counting(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return nograd::view(arange(0, static_cast<double>(n), 1, DType::f32), shape);
}

std::vector<float> values(const Tensor& t) {
  const Tensor c = nograd::contiguous(t);
  return {c.data<float>(), c.data<float>() + c.numel()};
}

std::vector<float> elements(const Tensor& full, int64_t first, int64_t count) {
  return values(nograd::narrow(nograd::view(nograd::contiguous(full), {full.numel()}), 0, first, count));
}

// Part `part` of 2 of a checkpoint: w [6, 5] as runs of elements split at 13, b [4] whole (part 0),
// e [6, 3] as rows along dim 0 split 3 and 3 (a tensor-parallel part).
StateShard part_of(int part, const Tensor& w, const Tensor& b, const Tensor& e) {
  const Tensor flat = nograd::view(w, {w.numel()});
  const int64_t split = 13;
  StateShard s;
  s.part = part;
  s.parts = 2;
  s.local.emplace_back("w", part == 0 ? nograd::narrow(flat, 0, 0, split) : nograd::narrow(flat, 0, split, 30 - split));
  s.places.emplace_back(ElementRun{part == 0 ? 0 : split, w.shape()});
  s.local.emplace_back("b", b);
  s.places.emplace_back();
  s.local.emplace_back("e", nograd::narrow(e, 0, 3 * part, 3));
  s.places.emplace_back(nn::parallel::TensorSplit{.dim = 0, .blocks = 1, .full_size = 6});
  return s;
}

// Shard tp x 2 + z of 4 of c [3, 8] and d [3, 5], each split along dim 1 over 2 tp ranks (c in 2 fused
// blocks of 4 columns, parts [3, 4]; d padded to 6 columns, parts [3, 3], rank 1's last column padding),
// each part cut by ZeRO over 2 ranks at element 5: one run of each part.
const nn::parallel::TensorSplit kFusedColumns{.dim = 1, .blocks = 2, .full_size = 8};
const nn::parallel::TensorSplit kPaddedColumns{.dim = 1, .blocks = 1, .full_size = 5};
StateShard part_runs_of(int tp, int z, const Tensor& c, const Tensor& d) {
  StateShard s;
  s.part = tp * 2 + z;
  s.parts = 4;
  for (const auto& [name, full, split] : {std::tuple{"c", c, kFusedColumns}, std::tuple{"d", d, kPaddedColumns}}) {
    const Tensor part = nn::parallel::split_part(full, split, tp, 2);
    const Tensor flat = nograd::view(nograd::contiguous(part), {part.numel()});
    const int64_t cut = 5, first = z == 0 ? 0 : cut, count = z == 0 ? cut : part.numel() - cut;
    s.local.emplace_back(name, nograd::narrow(flat, 0, first, count));
    s.places.emplace_back(PartRun{split, tp, part.shape(), first});
  }
  return s;
}

void write_parts(const fs::path& dir, const std::vector<StateShard>& parts) {
  for (const StateShard& s : parts) {
    auto [tensors, metadata] = state_shard_file(s);
    save_safetensors((dir / state_shard_file_name("model", s.part, s.parts)).string(), tensors, metadata);
  }
  std::ofstream(dir / state_shard_index_name("model")) << state_shard_index("model", static_cast<int>(parts.size()));
}

}  // namespace

TEST_CASE("DictStateReader reads any run of an entry's elements, and refuses a range outside it naming the entry") {
  const Tensor w = counting({3, 4});
  const DictStateReader reader({{"w", w}, {"b", counting({2})}});
  REQUIRE(reader.entries().size() == 2);
  CHECK(reader.entries()[0].name == "w");
  CHECK(reader.entries()[0].shape == Shape{3, 4});
  CHECK(reader.find("b") == std::optional<size_t>{1});
  CHECK_FALSE(reader.find("c").has_value());
  CHECK(values(reader.read(0, 5, 4)) == elements(w, 5, 4));
  CHECK(reader.read_whole(0).shape() == Shape{3, 4});
  CHECK(error_of([&] { reader.read(0, 10, 3); }) ==
        "StateReader::read: elements 10 to 13 of 'w', which has 12 ([3, 4]); a range within it expected");
}

TEST_CASE("SafetensorsReader reads the asked elements of several files and refuses a name in two of them") {
  TempDir dir("state_reader");
  const Tensor a = counting({4, 5}), b = counting({7});
  save_safetensors((dir.path / "one.safetensors").string(), {{"a", a}});
  save_safetensors((dir.path / "two.safetensors").string(), {{"b", b}});
  const SafetensorsReader reader({(dir.path / "one.safetensors").string(), (dir.path / "two.safetensors").string()});
  REQUIRE(reader.entries().size() == 2);
  CHECK(values(reader.read(0, 3, 9)) == elements(a, 3, 9));
  CHECK(values(reader.read(1, 2, 5)) == elements(b, 2, 5));
  save_safetensors((dir.path / "again.safetensors").string(), {{"a", b}});
  CHECK(error_of([&] {
          SafetensorsReader({(dir.path / "one.safetensors").string(), (dir.path / "again.safetensors").string()});
        }).find("'a' is in both") != std::string::npos);
}

TEST_CASE("open_state_shards reads runs that straddle the parts' files exactly, and checks coverage on open") {
  TempDir dir("state_reader");
  const Tensor w = counting({6, 5}), b = counting({4}), e = counting({6, 3});
  write_parts(dir.path, {part_of(0, w, b, e), part_of(1, w, b, e)});
  const auto reader = open_state_shards(dir.path, "model");
  REQUIRE(reader->entries().size() == 3);
  CHECK(reader->entries()[0].name == "w");
  CHECK(reader->entries()[0].shape == Shape{6, 5});
  CHECK(reader->entries()[2].shape == Shape{6, 3});
  // Every run of w and e, including those that cross from one part's file into the other's.
  for (int64_t first = 0; first < 30; ++first)
    for (int64_t count = 0; first + count <= 30; count += 7) CHECK(values(reader->read(0, first, count)) == elements(w, first, count));
  for (int64_t first = 0; first < 18; ++first) CHECK(values(reader->read(2, first, 18 - first)) == elements(e, first, 18 - first));
  CHECK(values(reader->read_whole(1)) == values(b));
  CHECK(values(read_state_shards(dir.path, "model")[0].second) == values(w));
  // Part 1 left out of the index: the rows of e it held are missing.
  std::ofstream(dir.path / state_shard_index_name("model")) << R"({"files": ["model.shard-00001-of-00002.safetensors"]})";
  CHECK(error_of([&] { open_state_shards(dir.path, "model"); }).find("the shard files hold 13 of the 30 elements of 'w'") !=
        std::string::npos);
}

TEST_CASE("open_state_shards puts tensors together from runs of fused and of padded tensor-parallel parts split "
          "along dim 1") {
  TempDir dir("state_reader");
  const Tensor c = counting({3, 8}), d = counting({3, 5});
  REQUIRE(nn::parallel::split_part(d, kPaddedColumns, 1, 2).shape() == Shape{3, 3});
  std::vector<StateShard> shards;
  for (int tp = 0; tp < 2; ++tp)
    for (int z = 0; z < 2; ++z) shards.push_back(part_runs_of(tp, z, c, d));
  write_parts(dir.path, shards);
  // One piece of each tensor per file, though each run crosses several rows.
  for (const StateShard& s : shards)
    CHECK(load_safetensors_header((dir.path / state_shard_file_name("model", s.part, s.parts)).string()).tensors.size() == 2);
  const auto reader = open_state_shards(dir.path, "model");
  REQUIRE(reader->entries().size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    const Tensor& full = i == 0 ? c : d;
    CHECK(reader->entries()[i].shape == full.shape());
    for (int64_t first = 0; first < full.numel(); ++first)
      for (int64_t count = 0; first + count <= full.numel(); ++count)
        CHECK(values(reader->read(i, first, count)) == elements(full, first, count));
  }
  // Shard 3 (tp rank 1's second runs: 7 elements of c, 2 of d and padding) left out.
  std::ofstream(dir.path / state_shard_index_name("model"))
      << R"({"files": ["model.shard-00001-of-00004.safetensors", "model.shard-00002-of-00004.safetensors",)"
      << R"( "model.shard-00003-of-00004.safetensors"]})";
  CHECK(error_of([&] { open_state_shards(dir.path, "model"); }).find("the shard files hold 17 of the 24 elements of 'c'") !=
        std::string::npos);
  // A rank's own runs in memory: their elements read, the others refused.
  const auto own = state_shard_reader(shards[3]);
  CHECK(values(own->read(0, 11, 1)) == elements(c, 11, 1));  // row 1, column 3
  CHECK(values(own->read(0, 18, 2)) == elements(c, 18, 2));  // row 2, columns 2 and 3
  CHECK(values(own->read(1, 13, 2)) == elements(d, 13, 2));  // row 2, columns 3 and 4
  CHECK(error_of([&] { own->read(0, 17, 2); }).find("elements 17 to 19 of 'c' are not all held here (1 of 2)") !=
        std::string::npos);
}

TEST_CASE("open_state_shards refuses a piece whose full shape has a negative dim or too many elements, or whose "
          "offset lies past its full tensor, naming the file and the piece") {
  TempDir dir("state_reader");
  const std::string file = (dir.path / state_shard_file_name("model", 0, 1)).string();
  std::ofstream(dir.path / state_shard_index_name("model")) << state_shard_index("model", 1);
  auto refusal = [&](const std::string& place) {
    save_safetensors(file, {{"p", counting({3})}}, {{"accel_pieces", R"({"p": {"name": "x", )" + place + "}}"}});
    return error_of([&] { open_state_shards(dir.path, "model"); });
  };
  CHECK(refusal(R"("element_offset": 0, "full_shape": [-3])") ==
        "load_state: " + file + ": piece 'p' has the full shape [-3]; dims of at least 0 whose product int64 counts "
        "expected");
  CHECK(refusal(R"("element_offset": 0, "full_shape": [4294967296, 4294967296])")
            .find("piece 'p' has the full shape [4294967296, 4294967296]") != std::string::npos);
  // Offsets near int64's end are refused as not fitting (the check cannot overflow).
  CHECK(refusal(R"("element_offset": 9223372036854775807, "full_shape": [3])").find("does not fit its full tensor") !=
        std::string::npos);
  CHECK(refusal(R"("dim": 0, "offset": 9223372036854775807, "full_shape": [3])").find("does not fit its full tensor") !=
        std::string::npos);
  CHECK(refusal(R"("element_offset": 0, "full_shape": [3])").empty());
  // Runs of parts: the split's blocks, the part's rows and index, and the run's offset are checked.
  auto part_run = [&](const std::string& part_of, int64_t offset = 0) {
    return refusal(fmt::format(R"("element_offset": {}, "full_shape": [3], "part_of": {})", offset, part_of));
  };
  CHECK(part_run(R"({"dim": 0, "blocks": 1, "part": 0, "rows": 3})").empty());
  CHECK(part_run(R"({"dim": 0, "blocks": 1, "part": 0, "rows": 3})", 1).find("elements 1 to 4 of part 0 along dim 0") !=
        std::string::npos);
  for (const char* bad : {R"({"dim": 1, "blocks": 1, "part": 0, "rows": 3})", R"({"dim": 0, "blocks": 0, "part": 0, "rows": 3})",
                          R"({"dim": 0, "blocks": 2, "part": 0, "rows": 4})", R"({"dim": 0, "blocks": 1, "part": 0, "rows": 4})",
                          R"({"dim": 0, "blocks": 1, "part": 2, "rows": 3})", R"({"dim": 0, "blocks": 1, "part": -1, "rows": 3})"}) {
    INFO(bad);
    CHECK(part_run(bad).find("does not fit its full tensor") != std::string::npos);
  }
  CHECK(part_run(R"({"dim": 0, "blocks": 1, "part": 0})").find("the place of piece 'p' is not valid") != std::string::npos);
  // Every number of a place is an integer that int64 holds: not a float (nlohmann would truncate one,
  // and one past int64 is undefined to convert), not a string, not an integer past int64.
  CHECK(refusal(R"("element_offset": 0, "full_shape": [3, 2.5e40])") ==
        "load_state: " + file + ": piece 'p' has full_shape dim 1 2.5e+40; an integer that int64 holds expected");
  CHECK(refusal(R"("element_offset": 0, "full_shape": [3.0])").find("has full_shape dim 0 3.0;") != std::string::npos);
  CHECK(refusal(R"("element_offset": 0.5, "full_shape": [3])").find("has element_offset 0.5;") != std::string::npos);
  CHECK(refusal(R"("element_offset": 9223372036854775808, "full_shape": [3])")
            .find("has element_offset 9223372036854775808;") != std::string::npos);
  CHECK(refusal(R"("dim": "0", "offset": 0, "full_shape": [3])").find(R"(has dim "0";)") != std::string::npos);
  CHECK(refusal(R"("element_offset": 0, "full_shape": 3)").find("has full_shape 3; an array of dims expected") !=
        std::string::npos);
  CHECK(part_run(R"({"dim": 0, "blocks": 1.0, "part": 0, "rows": 3})").find("has blocks 1.0;") != std::string::npos);
}

TEST_CASE("state_shard_reader serves a rank's own runs and parts, those written elsewhere too, and refuses one it "
          "does not hold") {
  const Tensor w = counting({6, 5}), b = counting({4}), e = counting({6, 3});
  const auto reader = state_shard_reader(part_of(1, w, b, e));
  CHECK(values(reader->read(0, 13, 17)) == elements(w, 13, 17));
  CHECK(values(reader->read(0, 20, 4)) == elements(w, 20, 4));
  CHECK(values(reader->read_whole(1)) == values(b));
  CHECK(values(reader->read(2, 9, 9)) == elements(e, 9, 9));  // rows 3 to 5: the rank's part
  CHECK(error_of([&] { reader->read(0, 10, 5); }) ==
        "the state of rank 1 of 2: elements 10 to 15 of 'w' are not all held here (2 of 5); a reader of one rank's "
        "shard holds only that rank's runs");
  CHECK(error_of([&] { reader->read(2, 6, 6); }).find("elements 6 to 12 of 'e' are not all held here (3 of 6)") !=
        std::string::npos);
  // A part that ends in padding (5 rows split 3 and 3): its valid rows are read, the padding is not a row of e.
  const Tensor f = counting({5, 2});
  const nn::parallel::TensorSplit padded{.dim = 0, .blocks = 1, .full_size = 5};
  StateShard last;
  last.local = {{"f", nn::parallel::split_part(f, padded, 1, 2)}};
  last.places = {padded};
  last.part = 1;
  last.parts = 2;
  REQUIRE(last.local[0].second.shape() == Shape{3, 2});
  const auto padded_reader = state_shard_reader(last);
  CHECK(padded_reader->entries()[0].shape == f.shape());
  CHECK(values(padded_reader->read(0, 6, 4)) == elements(f, 6, 4));
  // A run that another part writes: left out of the file, but read back from memory.
  StateShard copy = part_of(1, w, b, e);
  copy.written_elsewhere = {true, false, false};
  CHECK(values(state_shard_reader(copy)->read(0, 13, 17)) == elements(w, 13, 17));
  const nn::StateDict written = state_shard_file(copy).first;
  CHECK(std::none_of(written.begin(), written.end(), [](const auto& t) { return t.first.rfind("w", 0) == 0; }));
  CHECK(written.size() == 1);  // e's rows; b is written by part 0
  copy.written_elsewhere = {true};
  CHECK(error_of([&] { state_shard_reader(copy); }) ==
        "state_shard_reader: 1 written_elsewhere flags for 3 tensors; one per tensor or none expected");
}

TEST_CASE("TensorParallelPartReader reads a rank's parts of fused and padded splits, and only their elements") {
  // w [6, 5] replicated, q [4, 6] in 3 fused blocks of 2 columns along dim 1, v [5, 3] as rows along dim 0
  // padded to 6, each seen by tp rank 0 and 1 of 2.
  const Tensor w = counting({6, 5}), q = counting({4, 6}), v = counting({5, 3});
  const std::map<std::string, nn::parallel::TensorSplit> splits{
      {"q", {.dim = 1, .blocks = 3, .full_size = 6}}, {"v", {.dim = 0, .blocks = 1, .full_size = 5}}};
  for (int rank = 0; rank < 2; ++rank) {
    INFO("tp rank ", rank, " of 2");
    const test_support::CountingStateReader full({{"w", w}, {"q", q}, {"v", v}});
    std::map<std::string, Tensor> parts{{"w", w}};
    for (const auto& [name, split] : splits) parts[name] = nn::parallel::split_part(name == "q" ? q : v, split, rank, 2);
    const TensorParallelPartReader reader(
        full,
        [&](const StateEntry& e) -> std::optional<TensorParallelPartReader::PartOf> {
          const auto it = splits.find(e.name);
          if (it == splits.end()) return std::nullopt;
          return TensorParallelPartReader::PartOf{it->second, parts[e.name].shape()};
        },
        rank, "test");
    for (size_t i = 0; i < 3; ++i) {
      const Tensor& part = parts[reader.entries()[i].name];
      CHECK(reader.entries()[i].shape == part.shape());
      for (int64_t first = 0; first < part.numel(); ++first)
        for (int64_t count = 0; first + count <= part.numel(); ++count)
          CHECK(values(reader.read(i, first, count)) == elements(part, first, count));
    }
    // Whole, the parts read their own elements only: half of q's, and v's rows 0-2 or 3-4 (not the padding).
    full.elements = 0;
    reader.read_all();
    CHECK(full.elements == 30 + 12 + (rank == 0 ? 9 : 6));
  }
  const DictStateReader wrong({{"q", counting({4, 8})}});
  CHECK(error_of([&] {
          TensorParallelPartReader(
              wrong, [&](const StateEntry&) { return std::optional(TensorParallelPartReader::PartOf{splits.at("q"), {4, 3}}); },
              0, "load_model_state");
        }) == "TensorParallel::load_model_state: 'q' in the state is [4, 8], but the model's full tensor is [4, 6]");
}

TEST_CASE("RenamedStateReader reads its base under new names, one name per entry") {
  auto base = std::make_shared<DictStateReader>(nn::StateDict{{"state.fc.weight.exp_avg", counting({3})}});
  const RenamedStateReader renamed(base, {"state.0.exp_avg"});
  CHECK(renamed.entries()[0].name == "state.0.exp_avg");
  CHECK(values(renamed.read(0, 1, 2)) == std::vector<float>{1, 2});
  CHECK(error_of([&] { RenamedStateReader(base, {}); }) ==
        "RenamedStateReader: 0 names for a state of 1 entries; one per entry expected");
}
