// bfloat16 conversions on the host: the reference of the GPU conversion kernels and the element
// type of bf16 gradient reductions. bf16 keeps float32's exponent and 8 bits of mantissa, so it
// halves what a reduction moves without float16's overflow risk.
//
//   uint16_t h = ds2::float_to_bf16(1.5f);      // round to nearest even
//   float back = ds2::bf16_to_float(h);         // 1.5f
#pragma once

#include <cstdint>
#include <cstring>

// Also compiled into the GPU conversion kernels, so both sides round identically.
#include "core/host_device.h"

namespace ds2 {

DS2_HOST_DEVICE inline uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0)
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // NaN stays a (quiet) NaN
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

DS2_HOST_DEVICE inline float bf16_to_float(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

}  // namespace ds2
