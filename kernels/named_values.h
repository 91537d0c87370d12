// NamedValue tables: the values of a settings enum with the names users type, and the lookups each
// such table needs (name of a value, value of a name, the list of names to offer). One table per
// enum replaces the lists that the settings, the config file, the CLI and the wizard would each spell.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accel {

template <class E>
struct NamedValue {
  E value;
  const char* name;
  // False for a value that is known (it parses, so a message can name it) but not offered yet.
  bool available = true;
};

template <class E, size_t N>
constexpr const char* name_in(const std::array<NamedValue<E>, N>& table, E value) {
  for (const NamedValue<E>& entry : table)
    if (entry.value == value) return entry.name;
  return "unknown";
}

// Any known name, available or not.
template <class E, size_t N>
constexpr std::optional<E> value_in(const std::array<NamedValue<E>, N>& table, std::string_view name) {
  for (const NamedValue<E>& entry : table)
    if (name == entry.name) return entry.value;
  return std::nullopt;
}

template <class E, size_t N>
constexpr bool available_in(const std::array<NamedValue<E>, N>& table, E value) {
  for (const NamedValue<E>& entry : table)
    if (entry.value == value) return entry.available;
  return false;
}

// The available names in table order.
template <class E, size_t N>
std::vector<std::string> available_names(const std::array<NamedValue<E>, N>& table) {
  std::vector<std::string> names;
  for (const NamedValue<E>& entry : table)
    if (entry.available) names.emplace_back(entry.name);
  return names;
}

// "no, fp16 or bf16": the available names for a message.
template <class E, size_t N>
std::string available_choices(const std::array<NamedValue<E>, N>& table) {
  const std::vector<std::string> names = available_names(table);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

}  // namespace accel
