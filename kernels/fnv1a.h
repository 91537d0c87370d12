// Fnv1a: the 64-bit FNV-1a hash behind the fingerprints that ranks compare (deferred-init recipes,
// mesh dims, tensor contents). It is fixed by its spec, so equal inputs hash equally on every build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace accel {

class Fnv1a {
 public:
  static constexpr uint64_t kOffsetBasis = 14695981039346656037ull;
  static constexpr uint64_t kPrime = 1099511628211ull;

  explicit Fnv1a(uint64_t seed = kOffsetBasis) : hash_(seed) {}

  Fnv1a& bytes(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) hash_ = (hash_ ^ p[i]) * kPrime;
    return *this;
  }
  // A whole word in one step: cheaper than its 8 bytes, and enough to tell words apart.
  Fnv1a& word(uint64_t value) {
    hash_ = (hash_ ^ value) * kPrime;
    return *this;
  }
  // The text's bytes and then a 0, so that "ab" + "c" and "a" + "bc" hash differently.
  Fnv1a& text(std::string_view s) { return bytes(s.data(), s.size()).word(0); }

  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_;
};

}  // namespace accel
