#include "core/bf16.h"
#include "core/cuda/check.h"
#include "core/error.h"
#include "kernels/clipped_relu.cuh"
#include "kernels/mma.cuh"
#include "kernels/rnn.h"
#include "kernels/rnn_fused_step.h"

namespace ds2::kernels {
namespace {

// 16 bytes from global to shared memory without the registers, zeros where !valid: U's through
// L2 only, asking it for the whole 128-byte block (the next chunk's loads want its other half);
// the state's through L1 too (a CTA's warps and the SM's other CTAs read the same state).
__device__ __forceinline__ void copy16_streamed(uint4* dst, const void* src, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void copy16_cached(uint4* dst, const void* src, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}

// CTA c computes outputs k in [16 c, 16 c + 16) for batch rows [0, 8). Its kWarps warps split K
// (U's columns) in chunks of 32; for each chunk a lane copies 8 consecutive bf16 of U's rows g
// and g + 8 and of state row g (g = lane / 4, the piece 8 (lane % 4) of the chunk),
// and two m16n8k16 products consume them: a permutation of k, the same on both operands, which
// lets every lane read back only what it copied (no barrier between copy and product). The copies
// run kStages - 1 groups of kDepth chunks ahead.
template <int kWarps, int kDepth, int kStages>
__global__ void __launch_bounds__(32 * kWarps)
    relu_fused_step_kernel(const uint16_t* __restrict__ u, int H, int ld16,
                           const uint16_t* __restrict__ x, const float* __restrict__ pre,
                           int ld_pre, float* __restrict__ h, uint16_t* __restrict__ h16, int B,
                           int t, const int* __restrict__ lengths, float clip) {
  constexpr int kPieces = 3;  // U's two rows, the state's row
  constexpr int kPerStage = kDepth * kPieces * 32;
  extern __shared__ uint4 staged[];  // [warp][stage][chunk][piece][lane]
  __shared__ float partial[kWarps][32 * 4];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  uint4* mine = staged + warp * kStages * kPerStage;
  const int k0 = blockIdx.x * 16;
  const int chunks = (ld16 + 31) / 32;
  const int per_warp = (chunks + kWarps - 1) / kWarps;
  const int c_begin = warp * per_warp, c_end = min(chunks, c_begin + per_warp);
  const int groups = c_end > c_begin ? (c_end - c_begin + kDepth - 1) / kDepth : 0;
  // U has ld16 rows (the padding ones zero); a last CTA past them reads row ld16 - 1, unused.
  const uint16_t* row_a = u + int64_t{min(k0 + g, ld16 - 1)} * ld16 + 8 * q;
  const uint16_t* row_b = u + int64_t{min(k0 + g + 8, ld16 - 1)} * ld16 + 8 * q;
  auto issue = [&](int group) {
    if (group < groups) {
      uint4* st = mine + (group % kStages) * kPerStage;
#pragma unroll
      for (int d = 0; d < kDepth; ++d) {
        const int c = c_begin + group * kDepth + d, j = c * 32 + 8 * q;
        // ld16 is a multiple of 8: a lane's piece is wholly inside or wholly past the row.
        const bool in = c < c_end && j < ld16;
        uint4* slot = st + d * kPieces * 32 + lane;
        copy16_streamed(slot, in ? row_a + c * 32 : u, in);
        copy16_streamed(slot + 32, in ? row_b + c * 32 : u, in);
        const bool valid = in && g < B;
        copy16_cached(slot + 64, valid ? x + int64_t{g} * ld16 + j : x, valid);
      }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");  // empty groups keep the count
  };
  float acc[4] = {};
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(s);
  for (int group = 0; group < groups; ++group) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2) : "memory");
    const uint4* st = mine + (group % kStages) * kPerStage;
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      const uint4* slot = st + d * kPieces * 32 + lane;
      const uint4 a = slot[0], b = slot[32];
      const uint4 s = slot[64];
      mma_bf16_16816(acc[0], acc[1], acc[2], acc[3], a.x, b.x, a.y, b.y, s.x, s.y);
      mma_bf16_16816(acc[0], acc[1], acc[2], acc[3], a.z, b.z, a.w, b.w, s.z, s.w);
    }
    // Into the stage read one iteration ago, whose values the products above have consumed.
    issue(group + kStages - 1);
  }
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#pragma unroll
  for (int i = 0; i < 4; ++i) partial[warp][lane * 4 + i] = acc[i];
  __syncthreads();
  // Element e of the tile: lane l = e / 4's accumulator i = e % 4, at row l / 4 (+ 8 for i >= 2)
  // and column 2 (l % 4) + i % 2.
  for (int e = threadIdx.x; e < 128; e += 32 * kWarps) {
    const int l = e / 4, i = e % 4;
    const int k = k0 + l / 4 + (i >= 2 ? 8 : 0), b = 2 * (l % 4) + i % 2;
    if (k >= ld16 || b >= B) continue;
    if (k >= H) {
      h16[int64_t{b} * ld16 + k] = 0;
      continue;
    }
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += partial[w][e];
    const float v = t < lengths[b] ? clipped_relu(pre[int64_t{b} * ld_pre + k] + sum, clip) : 0.0f;
    h[int64_t{b} * H + k] = v;
    h16[int64_t{b} * ld16 + k] = float_to_bf16(v);
  }
}

// Measured (H200, `bash scripts/dev/fused-step.sh`, us a step of the walk at batch 8, warps x
// chunks a group x stages): 4 x 1 x 8 H 4608 10.75, H 5120 15.76, H 6144 21.38; 4 x 2 x 6 11.34,
// 16.04, 21.94; 2 x 2 x 8 15.37, 18.38, 22.83; loads pipelined in registers instead 13.95, 15.82,
// 21.07. 48 KiB of stages a CTA: four CTAs an SM, so all 384 CTAs of H 6144 are resident at once.
constexpr int kWarps = 4, kDepth = 1, kStages = 8;
constexpr int kBytes = kWarps * kStages * kDepth * 3 * 32 * 16;

}  // namespace

void rnn_relu_fused_step_forward(const uint16_t* u_bf16, int H, const uint16_t* h_prev_bf16,
                                 const float* pre, int ld_pre, float* h, uint16_t* h_bf16, int B,
                                 int t, const int* lengths, float clip, cudaStream_t stream) {
  if (B <= 0 || H <= 0) return;
  DS2_CHECK(rnn_relu_fused_step_fits(B), "the fused clipped-ReLU step takes batches of 1-"
                                             << kRnnFusedStepMaxBatch << ", not " << B);
  const auto kernel = relu_fused_step_kernel<kWarps, kDepth, kStages>;
  // Up to the 48 KiB a launch gets without asking, but set so that deeper stages need no other
  // change; a host call, per device, so every launch (the layers capture their steps: once a
  // capture).
  DS2_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes));
  const int ld16 = rnn_padded_ld(H);
  kernel<<<(ld16 + 15) / 16, 32 * kWarps, kBytes, stream>>>(u_bf16, H, ld16, h_prev_bf16, pre,
                                                            ld_pre, h, h_bf16, B, t, lengths, clip);
  DS2_CUDA_CHECK_LAUNCH();
}

}  // namespace ds2::kernels
