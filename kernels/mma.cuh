// Tensor-core products shared by the kernels that use them (implicit-GEMM convolution, the
// tensor-core persistent RNN): one warp-wide mma.sync with fp32 accumulation, of bf16 or fp16
// operands.
//
//   mma_bf16_16816(c0, c1, c2, c3, a0, a1, a2, a3, b0, b1);   // c (16 x 8) += a (16 x 16) b
//   uint32_t a0 = pack_bf16x2(x0, x1);   // an operand register: x0 in the low half
//   mma_f16_16816(c0, c1, c2, c3, a0, a1, a2, a3, b0, b1);    // the same with fp16 operands
//   uint32_t h0 = pack_f16x2(x0, x1);    // x0, x1 rounded to fp16, x0 in the low half
//
// Fragments (PTX ISA, g = lane / 4, q = lane % 4). m16n8k16 (each register two bf16, the lower
// column or row in the low half): a0 = A[g][2q..], a1 = A[g + 8][2q..], a2 = A[g][2q + 8..],
// a3 = A[g + 8][2q + 8..]; b0 = B[2q..][g], b1 = B[2q + 8..][g]; c0, c1 = C[g][2q..], c2, c3 =
// C[g + 8][2q..].
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace ds2::kernels {

// Two values rounded to bf16 (nearest even) as one operand register, lo in the low half (the
// lower row or column of the fragment pair).
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ void mma_bf16_16816(float& d0, float& d1, float& d2, float& d3,
                                               uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                               uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Two values rounded to fp16 (nearest even) as one operand register, lo in the low half.
__device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ void mma_f16_16816(float& d0, float& d1, float& d2, float& d3,
                                              uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                              uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

}  // namespace ds2::kernels
