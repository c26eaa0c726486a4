#include "core/checksum.h"

#include <array>

namespace ds2 {
namespace {

// The byte-at-a-time table of a reflected CRC: entry i is the register after shifting byte i
// through eight rounds of `polynomial`.
std::array<uint32_t, 256> reflected_table(uint32_t polynomial) {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t r = i;
    for (int bit = 0; bit < 8; ++bit) r = (r >> 1) ^ ((r & 1u) ? polynomial : 0u);
    t[i] = r;
  }
  return t;
}

uint32_t reflected_crc(const std::array<uint32_t, 256>& table, const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t r = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) r = table[(r ^ p[i]) & 0xFFu] ^ (r >> 8);
  return r ^ 0xFFFFFFFFu;
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  static const std::array<uint32_t, 256> table = reflected_table(0x82F63B78u);
  return reflected_crc(table, data, size);
}

uint32_t crc32(const void* data, size_t size) {
  static const std::array<uint32_t, 256> table = reflected_table(0xEDB88320u);
  return reflected_crc(table, data, size);
}

}  // namespace ds2
