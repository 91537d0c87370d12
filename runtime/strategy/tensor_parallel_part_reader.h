// TensorParallelPartReader: a full state seen as one tensor-parallel rank's parts, so that a rank of a
// TP model (under ZeRO: each rank's slices of its parts) reads only the elements it holds.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "nn/parallel/partition.h"
#include "runtime/state_reader.h"

namespace accel {

class TensorParallelPartReader final : public StateReader {
 public:
  // How one entry is split, with the shape of this rank's part (the live parameter's).
  struct PartOf {
    nn::parallel::TensorSplit split;
    Shape part_shape;
  };
  // The split of an entry of the full state, or nullopt for one read as it is (replicated, a count, or
  // a name the model does not have).
  using PartFor = std::function<std::optional<PartOf>(const StateEntry& entry)>;

  // full must outlive the reader. Each split entry of full becomes rank `rank`'s part in part_shape,
  // its padding (a vocabulary that does not divide by tp) zeros. A split entry whose shape is not the
  // part's with the split dim at full_size throws an accel::Error naming who, the entry and both shapes.
  TensorParallelPartReader(const StateReader& full, const PartFor& part_for, int rank, const char* who);

 private:
  Tensor read_range(size_t i, int64_t first, int64_t count) const override;

  const StateReader& full_;
  std::vector<std::optional<PartOf>> parts_;  // per entry
  int rank_;
};

}  // namespace accel
