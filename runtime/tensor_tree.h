// Nested structures of tensors, as the Accelerator's gather, reduce and broadcast take them: a Tensor,
// or a std::vector or a std::map<std::string, ...> of them, to any depth. A collective runs leaf by
// leaf in one fixed order (vector order, then key order), the same on every rank.
#pragma once

#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "tensor/tensor.h"

namespace accel {

template <class T>
struct IsTensorTree : std::false_type {};
template <>
struct IsTensorTree<Tensor> : std::true_type {};
template <class T>
struct IsTensorTree<std::vector<T>> : IsTensorTree<T> {};
template <class T>
struct IsTensorTree<std::map<std::string, T>> : IsTensorTree<T> {};

// A structure of tensors other than one Tensor (for which the plain overloads exist).
template <class T>
concept NestedTensors = IsTensorTree<T>::value && !std::is_same_v<T, Tensor>;

// The same structure with f applied to each leaf.
template <class F>
Tensor map_leaves(const Tensor& tensor, F& f) {
  return f(tensor);
}
template <class T, class F>
std::vector<T> map_leaves(const std::vector<T>& items, F& f) {
  std::vector<T> out;
  out.reserve(items.size());
  for (const T& item : items) out.push_back(map_leaves(item, f));
  return out;
}
template <class T, class F>
std::map<std::string, T> map_leaves(const std::map<std::string, T>& items, F& f) {
  std::map<std::string, T> out;
  for (const auto& [key, item] : items) out.emplace(key, map_leaves(item, f));
  return out;
}

// The structure without the tensors, for comparing it across ranks: "{logits: T, parts: [T, T]}".
inline std::string structure_of(const Tensor&) { return "T"; }
template <class T>
std::string structure_of(const std::vector<T>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + structure_of(items[i]);
  return out + "]";
}
template <class T>
std::string structure_of(const std::map<std::string, T>& items) {
  std::string out = "{";
  for (const auto& [key, item] : items) out += (out.size() > 1 ? ", " : "") + key + ": " + structure_of(item);
  return out + "}";
}

}  // namespace accel
