// TFRecord framing, the container of TensorBoard's event files: each record is
//   uint64 length, uint32 masked CRC32C of those 8 bytes, the data, uint32 masked CRC32C of the data
// (all little-endian). CRC32C is the Castagnoli CRC (iSCSI, RFC 3720).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace accel {

// CRC32C of size bytes, continuing from crc (0 to start).
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
// TensorFlow's mask, ((crc >> 15) | (crc << 17)) + 0xa282ead8, applied to crc32c(data).
uint32_t masked_crc32c(const void* data, size_t size);
// data framed as one TFRecord.
std::string tfrecord(const std::string& data);

}  // namespace accel
