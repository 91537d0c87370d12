// StateReader's range checks and whole reads, and its readers over memory, safetensors files and new names.
#include "runtime/state_reader.h"

#include <fmt/format.h>

#include <unordered_map>

#include "autograd/grad_mode.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"

namespace accel {

namespace {

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

std::optional<size_t> StateReader::find(const std::string& name) const {
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].name == name) return i;
  return std::nullopt;
}

Tensor StateReader::read(size_t i, int64_t first, int64_t count) const {
  if (i >= entries_.size())
    throw Error(fmt::format("StateReader::read: entry {} asked of a state of {} entries", i, entries_.size()));
  const int64_t numel = numel_of(entries_[i].shape);
  if (first < 0 || count < 0 || first > numel || count > numel - first)
    throw Error(fmt::format("StateReader::read: elements {} to {} of '{}', which has {} ({}); a range within it "
                            "expected",
                            first, first + count, entries_[i].name, numel, shape_str(entries_[i].shape)));
  return read_range(i, first, count);
}

Tensor StateReader::read_whole(size_t i) const {
  const int64_t numel = i < entries_.size() ? numel_of(entries_[i].shape) : 0;
  NoGradGuard no_grad;
  return nograd::view(nograd::contiguous(read(i, 0, numel)), entries_[i].shape);
}

nn::StateDict StateReader::read_all() const {
  nn::StateDict out;
  for (size_t i = 0; i < entries_.size(); ++i) out.emplace_back(entries_[i].name, read_whole(i));
  return out;
}

DictStateReader::DictStateReader(nn::StateDict state) : state_(std::move(state)) {
  std::vector<StateEntry> entries;
  for (const auto& [name, t] : state_) {
    if (!t.defined()) throw Error(fmt::format("load_state_dict: '{}' is an undefined tensor", name));
    entries.push_back({name, t.shape(), t.dtype()});
  }
  set_entries(std::move(entries));
}

Tensor DictStateReader::read_range(size_t i, int64_t first, int64_t count) const {
  NoGradGuard no_grad;
  const Tensor& t = state_[i].second;
  return nograd::narrow(nograd::view(nograd::contiguous(t), {t.numel()}), 0, first, count);
}

SafetensorsReader::SafetensorsReader(std::vector<std::string> paths) : paths_(std::move(paths)) {
  std::vector<StateEntry> entries;
  std::unordered_map<std::string, size_t> file_of;
  for (size_t f = 0; f < paths_.size(); ++f) {
    headers_.push_back(load_safetensors_header(paths_[f]).tensors);
    for (size_t e = 0; e < headers_[f].size(); ++e) {
      const SafetensorsEntry& entry = headers_[f][e];
      if (const auto [it, fresh] = file_of.emplace(entry.name, f); !fresh)
        throw Error(fmt::format("SafetensorsReader: '{}' is in both {} and {}; each tensor of a state belongs to one "
                                "file",
                                entry.name, paths_[it->second], paths_[f]));
      entries.push_back({entry.name, entry.shape, entry.dtype});
      places_.push_back({f, e});
    }
  }
  set_entries(std::move(entries));
}

Tensor SafetensorsReader::read_range(size_t i, int64_t first, int64_t count) const {
  const Place& p = places_[i];
  return read_safetensors_elements(paths_[p.file], headers_[p.file][p.entry], first, count);
}

RenamedStateReader::RenamedStateReader(std::shared_ptr<const StateReader> base, const std::vector<std::string>& names)
    : base_(std::move(base)) {
  if (names.size() != base_->entries().size())
    throw Error(fmt::format("RenamedStateReader: {} names for a state of {} entries; one per entry expected",
                            names.size(), base_->entries().size()));
  std::vector<StateEntry> entries = base_->entries();
  for (size_t i = 0; i < names.size(); ++i) entries[i].name = names[i];
  set_entries(std::move(entries));
}

}  // namespace accel
