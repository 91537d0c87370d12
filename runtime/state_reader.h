// StateReader: a full state (a model's or an optimizer's) that is read in pieces: the names, shapes and
// dtypes of its entries up front, and any run of one entry's elements on demand. A sharded strategy
// loads through it so that each rank reads only the elements its shards hold; from files only their
// bytes are read.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/module.h"
#include "runtime/safetensors.h"
#include "tensor/tensor.h"

namespace accel {

struct StateEntry {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
};

class StateReader {
 public:
  virtual ~StateReader() = default;
  const std::vector<StateEntry>& entries() const { return entries_; }
  std::optional<size_t> find(const std::string& name) const;
  // Elements [first, first + count) of entry i in row-major order, as a 1-D tensor (it may be a view
  // of state the reader holds: copy it before changing it). A range outside the entry throws an
  // accel::Error naming it.
  Tensor read(size_t i, int64_t first, int64_t count) const;
  // Entry i whole, in its shape.
  Tensor read_whole(size_t i) const;
  // Every entry whole, in order: the full state on this rank.
  nn::StateDict read_all() const;

 protected:
  StateReader() = default;
  void set_entries(std::vector<StateEntry> entries) { entries_ = std::move(entries); }
  // read's work, with the range checked.
  virtual Tensor read_range(size_t i, int64_t first, int64_t count) const = 0;

 private:
  std::vector<StateEntry> entries_;
};

// Over a state held in memory.
class DictStateReader final : public StateReader {
 public:
  explicit DictStateReader(nn::StateDict state);

 private:
  Tensor read_range(size_t i, int64_t first, int64_t count) const override;
  nn::StateDict state_;
};

// Over one safetensors file, or the several files of one state (Hugging Face's model-0000k-of-0000n
// shards): the headers are read now, the elements when asked. A name in two files throws.
class SafetensorsReader final : public StateReader {
 public:
  explicit SafetensorsReader(std::vector<std::string> paths);

 private:
  struct Place {
    size_t file = 0;
    size_t entry = 0;
  };
  Tensor read_range(size_t i, int64_t first, int64_t count) const override;
  std::vector<std::string> paths_;
  std::vector<Place> places_;  // per entry
  std::vector<std::vector<SafetensorsEntry>> headers_;  // per file
};

// base under other names: entry i of base is called names[i].
class RenamedStateReader final : public StateReader {
 public:
  RenamedStateReader(std::shared_ptr<const StateReader> base, const std::vector<std::string>& names);

 private:
  Tensor read_range(size_t i, int64_t first, int64_t count) const override { return base_->read(i, first, count); }
  std::shared_ptr<const StateReader> base_;
};

}  // namespace accel
