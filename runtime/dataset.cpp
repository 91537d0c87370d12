// Dataset defaults and the in-memory TensorDataset.
#include "runtime/dataset.h"

#include <fmt/format.h>

#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"

namespace accel {

std::vector<Tensor> Dataset::get_batch(const std::vector<int64_t>& indices) const {
  if (indices.empty()) throw Error("Dataset::get_batch: got no indices");
  std::vector<std::vector<Tensor>> per_field;
  for (int64_t index : indices) {
    std::vector<Tensor> sample = get(index);
    if (per_field.empty()) per_field.resize(sample.size());
    if (sample.size() != per_field.size())
      throw Error(fmt::format("Dataset::get_batch: sample {} has {} fields, sample {} had {}", index, sample.size(),
                              indices.front(), per_field.size()));
    for (size_t f = 0; f < sample.size(); ++f) per_field[f].push_back(sample[f]);
  }
  std::vector<Tensor> batch;
  for (const auto& field : per_field) batch.push_back(nograd::stack(field, 0));
  return batch;
}

TensorDataset::TensorDataset(std::vector<Tensor> fields) : fields_(std::move(fields)) {
  if (fields_.empty()) throw Error("TensorDataset: needs at least one tensor");
  for (size_t f = 0; f < fields_.size(); ++f) {
    if (fields_[f].dim() == 0)
      throw Error(fmt::format("TensorDataset: field {} is 0-d; each field needs a first dim of samples", f));
    if (fields_[f].size(0) != fields_[0].size(0))
      throw Error(fmt::format("TensorDataset: field {} has {} samples ({}), field 0 has {} ({})", f,
                              fields_[f].size(0), shape_str(fields_[f].shape()), fields_[0].size(0),
                              shape_str(fields_[0].shape())));
  }
}

int64_t TensorDataset::size() const { return fields_[0].size(0); }

std::vector<Tensor> TensorDataset::get(int64_t index) const {
  if (index < 0 || index >= size())
    throw Error(fmt::format("TensorDataset::get: index {} out of range for {} samples", index, size()));
  std::vector<Tensor> sample;
  for (const Tensor& field : fields_) sample.push_back(nograd::select(field, 0, index));
  return sample;
}

std::vector<Tensor> TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  const Tensor index = from_vector<int64_t>(indices);
  std::vector<Tensor> batch;
  for (const Tensor& field : fields_) batch.push_back(nograd::index_select(field, 0, index));
  return batch;
}

}  // namespace accel
