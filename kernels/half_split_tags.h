// The fp16 split's numbers, on the host as on the device: U and the state are each split into two
// fp16 halves, v = hi + lo / kHalfLoScale. The state's halves also carry the tagged exchange's
// 1-bit step tag in their lowest bit (kernels/tagged_exchange.cuh), so the rounding that picks
// them is checked on the host (tests/kernels/half_split_tags_test.cpp).
//
//   uint16_t hi, lo;
//   half_split_tagged_parts(v, half_split_step_tag(s), hi, lo);   // the exchange's two halves
//   const float back = half_bits_value(hi) + half_bits_value(lo) / kHalfLoScale;  // ~v
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "core/bf16.h"  // DS2_HOST_DEVICE

namespace ds2::kernels {

// U = hi + lo / kHalfLoScale with hi = U rounded to fp16 and lo = (U - hi) * kHalfLoScale rounded
// to fp16, together within ~2^-22 |U| for |U| in fp16's normal range (and within 2^-35 absolutely
// below it). The state is split likewise (tagged, below); the products hi h_hi + (hi h_lo + lo
// h_hi) / kHalfLoScale + lo h_lo / kHalfLoScale^2 then carry fp32 accuracy.
constexpr float kHalfLoScale = 2048.0f;

// The fp16 value nearest x whose lowest bit is `tag` (0 or 1), as bits: x rounded toward zero and
// the next value up in magnitude bracket x and differ in that bit, so it is within one ulp of x;
// at fp16's largest finite value it steps down instead (never to infinity).
DS2_HOST_DEVICE inline uint16_t half_with_tag(float x, uint32_t tag) {
  const uint32_t b = __half_as_ushort(__float2half_rz(x)), fix = (b ^ tag) & 1u;
  return static_cast<uint16_t>((b & 0x7fffu) == 0x7bffu ? b - fix : b + fix);
}

DS2_HOST_DEVICE inline float half_bits_value(uint16_t bits) {
  return __half2float(__ushort_as_half(bits));
}

// A state value's two tagged halves: hi = v to fp16 and lo = (v - hi) * kHalfLoScale to fp16,
// each the nearest with the tag's bit. Together within 2^-20 |v| (plus 2^-33 absolutely, where hi
// is an fp16 subnormal) for |v| below 65504, fp16's largest value.
DS2_HOST_DEVICE inline void half_split_tagged_parts(float v, uint32_t tag, uint16_t& hi,
                                                    uint16_t& lo) {
  hi = half_with_tag(v, tag);
  lo = half_with_tag((v - half_bits_value(hi)) * kHalfLoScale, tag);
}

}  // namespace ds2::kernels
