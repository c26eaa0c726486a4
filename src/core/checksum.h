// Checksums of byte ranges: CRC-32C (Castagnoli), which checkpoints and TensorBoard records carry,
// and the classic CRC-32 (zlib's), which exported models and checkpoints written before CRC-32C
// carry.
//
//   uint32_t c = ds2::crc32c("123456789", 9);   // 0xE3069283
//   uint32_t z = ds2::crc32("123456789", 9);    // 0xCBF43926
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds2 {

// CRC-32C: reflected polynomial 0x82F63B78, initial and final XOR 0xFFFFFFFF.
uint32_t crc32c(const void* data, size_t size);
// CRC-32 (IEEE 802.3, zlib): reflected polynomial 0xEDB88320, initial and final XOR 0xFFFFFFFF.
uint32_t crc32(const void* data, size_t size);

}  // namespace ds2
