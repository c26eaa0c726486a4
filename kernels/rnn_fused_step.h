// The bf16 clipped ReLU's GEMM-recurrence forward step in one kernel, for large H at small batch:
// the product h_prev U^T that cuBLAS would compute, and then what rnn_relu_step_forward (rnn.h)
// does with it, in one launch. At large H a step's time is U's read from HBM (U of H 5120 is 52 MB
// in bf16), which the kernel streams once, 16 of U's rows a CTA with its warps splitting K, the
// loads running ahead through shared memory; each warp's partial sums add in a fixed order (the
// same bits every run). Saving the step kernel's launch and its round of loads is what it gains.
//
// Contract (the GEMM recurrence's product plus rnn_relu_step_forward, to rounding): for row
// b valid at t (t < lengths[b]), h[b, k] = min(max(pre[b, k] + sum_j h_prev[b, j] U[k, j], 0),
// clip), else 0; h_bf16 is h rounded (nearest even) with its padding columns [H, ld16) zero.
// U: the bf16 copy {ld16, ld16} (rows and columns padded with zeros, ld16 = rnn_padded_ld(H));
// h_prev: {B, ld16} bf16 (its padding columns zero). Sums of products in fp32.
//
//   if (kernels::rnn_relu_fused_step_fits(B))
//     kernels::rnn_relu_fused_step_forward(u16, H, h_prev16, pre_t, ld_pre, h_t, h16_t, B, t,
//                                          lengths, clip, stream);
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ds2::kernels {

// The largest batch the fused step takes (one 8-column tile of the tensor cores' products; with
// two, batch 9-16 ran slower than cuBLAS's GEMM and the step kernel: H 5120 batch 16 18.30 us a
// step against 17.16, H 4608 14.25 against 10.72).
constexpr int kRnnFusedStepMaxBatch = 8;

constexpr bool rnn_relu_fused_step_fits(int B) {
  return B >= 1 && B <= kRnnFusedStepMaxBatch;
}

void rnn_relu_fused_step_forward(const uint16_t* u_bf16, int H, const uint16_t* h_prev_bf16,
                                 const float* pre, int ld_pre, float* h, uint16_t* h_bf16, int B,
                                 int t, const int* lengths, float clip, cudaStream_t stream);

}  // namespace ds2::kernels
