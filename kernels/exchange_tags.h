// The step tags of the persistent kernels' tagged exchange (kernels/tagged_exchange.cuh) and the
// fill a launch gives the exchange, on the host as on the device, so that the rules that make a
// tag unambiguous are checked on the host (tests/kernels/exchange_tags_test.cpp).
//
//   store_tagged(xout + i, h, step_tag(s));       // bf16 words: a 16-bit tag beside the value
//   store_tagged(xout + i, h, fp32_step_tag(s));  // fp32 values: the tag in the lowest bit
//   store_half_split_tagged(hi, lo, h, half_split_step_tag(s));  // fp32 split: fp16 halves
//
// The exchange has two parities, so a reader of step s finds in its place either step s or the
// step two before, never a later one (no CTA writes step s + 2 before every CTA has read step s:
// each needs all of step s + 1). A tag need only tell s from s - 2, and the fill must match
// neither step 0 nor step 1, the first words written to each parity.
#pragma once

#include <cstdint>

#include "core/bf16.h"  // DS2_HOST_DEVICE

namespace ds2::kernels {

// bf16 words: s + 1 in 16 bits (wraps; by then every word has been rewritten).
DS2_HOST_DEVICE inline uint32_t step_tag(int s) {
  return static_cast<uint32_t>(s + 1) & 0xffffu;
}
// What a launch fills a bf16 exchange with: words of tag 0.
constexpr unsigned char kTaggedWordFillByte = 0x00;

// fp32 values: (s / 2) mod 2, one bit (a change of at most one ulp, 2^-23 relative, to the
// exchanged copy only; y keeps the exact value).
DS2_HOST_DEVICE inline uint32_t fp32_step_tag(int s) {
  return static_cast<uint32_t>(s >> 1) & 1u;
}
// fp16 split state (two fp16 halves a value, the tag in each half's lowest bit): fp32_step_tag
// flipped, so that the zero fill (kTaggedWordFillByte, which also clears the control block after
// the exchange) passes for neither step 0 nor step 1.
DS2_HOST_DEVICE inline uint32_t half_split_step_tag(int s) {
  return fp32_step_tag(s) ^ 1u;
}
// What a launch fills an fp32 exchange with (the fp32-math kernel's values): all ones, lowest
// bit 1.
constexpr unsigned char kTaggedFp32FillByte = 0xff;

}  // namespace ds2::kernels
