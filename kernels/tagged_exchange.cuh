// A state exchange that synchronizes through its data: every state element travels with the step
// that wrote it (bf16: in a 32-bit word beside a 16-bit tag; fp32: the tag in its lowest bit;
// fp32 split into two fp16 halves: the tag in each half's lowest bit), so a reader waits for
// exactly the values it needs instead of for a grid barrier (no fence, no atomic counter; the
// Persistent RNN design's "synchronize through the data"). Writer and readers use relaxed .gpu
// accesses (L2, never a stale L1 line; single-copy atomic per word or half, so value and tag
// always arrive together).
//
//   store_tagged(xout + index, h, step_tag(s));            // step s writes its state
//   uint4 w = load_tagged(frag);                           // step s + 1 reads a lane's 4 words
//   while (tag_mismatch(w, step_tag(s)) != 0) w = load_tagged(frag);
//   const uint2 b = tagged_fragment(w);                    // the mma.sync B registers
//   store_half_split_tagged(hi, lo, h, half_split_step_tag(s));   // fp32 split: 16-bit halves
//
// The tags, the fills and why they are unambiguous: kernels/exchange_tags.h.
#pragma once

#include <cstdint>

#include "core/bf16.h"
#include "kernels/exchange_tags.h"
#include "kernels/half_split_tags.h"
#include "kernels/mma.cuh"
#include "kernels/persistent_rnn_fragments.cuh"

namespace ds2::kernels {

// The only accesses to a tagged exchange: a relaxed .gpu store of one word, a relaxed .gpu load
// of four (each word atomic, the four not together).
__device__ __forceinline__ void store_word_relaxed(void* p, uint32_t word) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(word) : "memory");
}

// v rounded to bf16 (nearest even) in the high half, the tag in the low half.
__device__ __forceinline__ void store_tagged(uint32_t* p, float v, uint32_t tag) {
  store_word_relaxed(p, (uint32_t{float_to_bf16(v)} << 16) | tag);
}

// One lane's B-fragment piece: four words, each read atomically (the four need not be).
__device__ __forceinline__ uint4 load_tagged(const uint4* p) {
  uint4 w;
  asm volatile("ld.relaxed.gpu.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(w.x), "=r"(w.y), "=r"(w.z), "=r"(w.w)
               : "l"(p));
  return w;
}

// The bits in which a piece's four tags differ from `tag` (zero when all four carry it): bf16
// words (16-bit tags).
__device__ __forceinline__ uint32_t tag_mismatch(const uint4& w, uint32_t tag) {
  const uint32_t both = tag * 0x10001u;
  return (__byte_perm(w.x, w.y, 0x5410) ^ both) | (__byte_perm(w.z, w.w, 0x5410) ^ both);
}

// The bf16 halves as two registers: words x, y (rows 2q, 2q + 1) and z, w (rows 2q + 8, 2q + 9),
// the lower row in the low half.
__device__ __forceinline__ uint2 tagged_fragment(const uint4& w) {
  return make_uint2(__byte_perm(w.x, w.y, 0x7632), __byte_perm(w.z, w.w, 0x7632));
}

// fp32 state (the fp32-math kernel): the tag replaces the lowest mantissa bit of each value.
__device__ __forceinline__ void store_tagged(float* p, float v, uint32_t tag) {
  store_word_relaxed(p, (__float_as_uint(v) & ~1u) | tag);
}

__device__ __forceinline__ float4 load_tagged(const float4* p) {
  const uint4 w = load_tagged(reinterpret_cast<const uint4*>(p));
  return make_float4(__uint_as_float(w.x), __uint_as_float(w.y), __uint_as_float(w.z),
                     __uint_as_float(w.w));
}

// Whether the columns set in `valid` (bit i: component i) all carry `tag`.
__device__ __forceinline__ bool tags_are(const float4& v, uint32_t tag, uint32_t valid) {
  const uint32_t bits = (__float_as_uint(v.x) & 1u) | (__float_as_uint(v.y) & 1u) << 1 |
                        (__float_as_uint(v.z) & 1u) << 2 | (__float_as_uint(v.w) & 1u) << 3;
  return ((bits ^ (tag * 0xfu)) & valid) == 0;
}

// A 16-bit relaxed .gpu store (single-copy atomic).
__device__ __forceinline__ void store_half_relaxed(uint16_t* p, uint16_t bits) {
  asm volatile("st.relaxed.gpu.global.u16 [%0], %1;" ::"l"(p), "h"(bits) : "memory");
}

// fp32 state for the fp16 split as two fp16 values that carry the tag in their lowest bit
// (kernels/half_split_tags.h). The reader tests the bits of the very halves it multiplies.
__device__ __forceinline__ void store_half_split_tagged(uint16_t* hi, uint16_t* lo, float v,
                                                        uint32_t tag) {
  uint16_t h, l;
  half_split_tagged_parts(v, tag, h, l);
  store_half_relaxed(hi, h);
  store_half_relaxed(lo, l);
}

}  // namespace ds2::kernels
