// Fnv1a gives the published FNV-1a 64-bit values, so fingerprints that ranks compare mean the same on
// every build; text() ends each string so that concatenations differ.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "kernels/fnv1a.h"

using namespace accel;

TEST_CASE("Fnv1a over bytes gives the published FNV-1a 64-bit test vectors") {
  const auto of = [](const std::string& s) { return Fnv1a().bytes(s.data(), s.size()).value(); };
  CHECK(of("") == 0xcbf29ce484222325ull);
  CHECK(of("a") == 0xaf63dc4c8601ec8cull);
  CHECK(of("foobar") == 0x85944171f73967e8ull);
}

TEST_CASE("Fnv1a::text ends each string, and word mixes a whole word in one step") {
  CHECK(Fnv1a().text("ab").text("c").value() != Fnv1a().text("a").text("bc").value());
  CHECK(Fnv1a().word(0x61).value() == Fnv1a().bytes("a", 1).value());
  CHECK(Fnv1a().word(1).word(2).value() != Fnv1a().word(2).word(1).value());
  CHECK(Fnv1a(7).word(1).value() == ((7ull ^ 1ull) * Fnv1a::kPrime));
}
