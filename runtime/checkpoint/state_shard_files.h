// Checkpoint files for state that a strategy keeps split across ranks (StateShard): every writing rank
// stores its own pieces of the split tensors, each with the place it takes in the full tensor (in the
// file's metadata), and part 0 also the tensors held whole. A piece is rows [offset, offset + r) along
// one dim (a tensor-parallel part), a run of the full tensor's elements in row-major order (a ZeRO
// rank's flat slice of a parameter), or a run of a tensor-parallel part's elements (a ZeRO rank's slice
// of its part: one piece, however many rows of the full tensor it crosses). Reading puts the full
// tensors together from every file, so the state loads at any other split or none.
//   <stem>.shard-00001-of-00002.safetensors, ...  and  <stem>.shards.json {"files": [...]}
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "nn/module.h"
#include "runtime/safetensors.h"
#include "runtime/state_reader.h"
#include "runtime/strategy/strategy.h"

namespace accel {

// The name of part's file, and its tensors and metadata (the pieces' places); the entries written
// elsewhere are left out.
std::string state_shard_file_name(const std::string& stem, int part, int parts);
std::pair<nn::StateDict, SafetensorsMetadata> state_shard_file(const StateShard& shard);

// <stem>.shards.json and its text, naming the parts' files.
std::string state_shard_index_name(const std::string& stem);
std::string state_shard_index(const std::string& stem, int parts);

// The full state in the files dir/<stem>.shards.json names, in part 0's order, read lazily: opening
// reads the files' headers only, and a read takes from each file just the bytes of the elements it
// asks for (a rank that loads its own slices reads about 1/N of the files). Throws an accel::Error
// naming the file and the tensor when a file is missing or bad, a piece does not fit its full tensor
// or overlaps another, or the pieces leave part of a full tensor uncovered.
std::unique_ptr<StateReader> open_state_shards(const std::filesystem::path& dir, const std::string& stem);
// All of it at once.
nn::StateDict read_state_shards(const std::filesystem::path& dir, const std::string& stem);
// One rank's StateShard in memory as a full state of which only its entries' pieces (runs of elements,
// tensor-parallel parts and runs of them) can be read, those written elsewhere included (a read outside
// them throws): what a rank puts back after a failed load.
std::unique_ptr<StateReader> state_shard_reader(const StateShard& shard);

}  // namespace accel
