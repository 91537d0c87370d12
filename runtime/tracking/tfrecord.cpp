// CRC32C and the TFRecord frame. Written here rather than taken from a library: Debian 12 packages
// no C or C++ CRC32C library (Google's crc32c is not in bookworm; Boost.CRC would bring 150 MB of
// headers for these twenty lines). tests/tracking checks it against the standard check value and
// against an independent reader.
#include "runtime/tracking/tfrecord.h"

#include <array>

namespace accel {

namespace {

// The reflected Castagnoli polynomial 0x1EDC6F41.
constexpr uint32_t kCastagnoli = 0x82F63B78u;

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1u) ? (c >> 1) ^ kCastagnoli : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kTable = make_table();

void append_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xffu);
}

}  // namespace

uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = kTable[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord(const std::string& data) {
  std::string out;
  append_le(out, data.size(), 8);
  append_le(out, masked_crc32c(out.data(), 8), 4);
  out += data;
  append_le(out, masked_crc32c(data.data(), data.size()), 4);
  return out;
}

}  // namespace accel
