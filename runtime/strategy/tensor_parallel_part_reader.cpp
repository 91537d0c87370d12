// TensorParallelPartReader: each read of a part's run becomes reads of the full entry's runs that it
// covers (nn::parallel::runs_in_full), the padding between or after them left at zero.
#include "runtime/strategy/tensor_parallel_part_reader.h"

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"

namespace accel {

TensorParallelPartReader::TensorParallelPartReader(const StateReader& full, const PartFor& part_for, int rank,
                                                   const char* who)
    : full_(full), rank_(rank) {
  std::vector<StateEntry> entries;
  for (const StateEntry& e : full.entries()) {
    std::optional<PartOf> part = part_for(e);
    entries.push_back(e);
    if (part) {
      Shape expected = part->part_shape;
      expected.at(static_cast<size_t>(part->split.dim)) = part->split.full_size;
      if (e.shape != expected)
        throw Error(fmt::format("TensorParallel::{}: '{}' in the state is {}, but the model's full tensor is {}", who,
                                e.name, shape_str(e.shape), shape_str(expected)));
      entries.back().shape = part->part_shape;
    }
    parts_.push_back(std::move(part));
  }
  set_entries(std::move(entries));
}

Tensor TensorParallelPartReader::read_range(size_t i, int64_t first, int64_t count) const {
  const std::optional<PartOf>& part = parts_[i];
  if (!part) return full_.read(i, first, count);
  const std::vector<nn::parallel::RunInFull> runs =
      nn::parallel::runs_in_full(part->part_shape, part->split, rank_, first, count);
  if (runs.size() == 1 && runs.front().count == count) return full_.read(i, runs.front().full_offset, count);
  NoGradGuard no_grad;
  Tensor out;
  for (const nn::parallel::RunInFull& run : runs) {
    const Tensor values = full_.read(i, run.full_offset, run.count);
    if (!out.defined()) out = zeros({count}, entries()[i].dtype, values.device());
    nograd::copy_(nograd::narrow(out, 0, run.part_offset, run.count), values);
  }
  return out.defined() ? out : zeros({count}, entries()[i].dtype);
}

}  // namespace accel
