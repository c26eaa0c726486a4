// Dev measurement, not part of the build: where the bf16 GRU GEMM recurrence's step goes
// (nn/cuda/gemm_recurrence.h: the product U h_prev by cuBLAS, then kernels::rnn_gru_step_forward;
// backward-data kernels::rnn_gru_step_backward, then next += dG U). Each row is us a step, a CUDA
// graph of 200 steps, median of 5 replays: the GEMM alone, the step kernel alone, and both chained
// as the layer runs them. The library's kernels are linked in (kernels/rnn.cu), so this measures
// the kernels the build ships (the step kernels' prefetch off: every step here reads the same
// arrays, all in L2; scripts/dev/step-prefetch.sh walks the steps' own). Run on the GPU machine:
// bash gru-step.sh.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "graph_timing.cuh"
#include "kernels/rnn.h"

int main() {
  const BlasStream bs = blas_stream();
  cudaStream_t s = bs.stream;
  cublasHandle_t hb = bs.blas;
  const int kMaxB = 64;
  const int* lengths = all_valid_lengths(kMaxB);
  printf("us a step: fwd gemm / step / both | bwd step / gemm / both\n");
  for (int H : {1104, 1296, 1536, 1704, 1904, 2048}) {
    const int h16 = ds2::kernels::rnn_padded_ld(H), g16 = ds2::kernels::rnn_padded_ld(3 * H);
    void *u, *x16, *d16;
    float *pre, *g, *bias, *hp, *h, *cand, *dy, *carry, *dpre, *dg, *next;
    const size_t rows = kMaxB;
    CHECK(cudaMalloc(&u, size_t(g16) * h16 * 2));
    CHECK(cudaMalloc(&x16, rows * h16 * 2));
    CHECK(cudaMalloc(&d16, rows * g16 * 2));
    for (float** p : {&pre, &g, &dpre, &dg}) CHECK(cudaMalloc(p, rows * g16 * 4));
    for (float** p : {&hp, &h, &cand, &dy, &carry, &next}) CHECK(cudaMalloc(p, rows * h16 * 4));
    CHECK(cudaMalloc(&bias, size_t(g16) * 4));
    // Small values (0x3c3c... bf16 ~0.0115, fp32 ~0.0115): no overflow in the gates.
    CHECK(cudaMemset(u, 0x3c, size_t(g16) * h16 * 2));
    CHECK(cudaMemset(x16, 0x3c, rows * h16 * 2));
    CHECK(cudaMemset(d16, 0x3c, rows * g16 * 2));
    for (float* p : {pre, g, dpre, dg}) CHECK(cudaMemset(p, 0x3c, rows * g16 * 4));
    for (float* p : {hp, h, cand, dy, carry, next}) CHECK(cudaMemset(p, 0x3c, rows * h16 * 4));
    CHECK(cudaMemset(bias, 0x3c, size_t(g16) * 4));
    const float one = 1, zero = 0;
    for (int B : {12, 24, 40, 48, 64}) {
      auto fwd_gemm = [&] {
        return cublasGemmEx(hb, CUBLAS_OP_T, CUBLAS_OP_N, 3 * H, B, h16, &one, u, CUDA_R_16BF, h16,
                            x16, CUDA_R_16BF, h16, &zero, g, CUDA_R_32F, g16, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
      };
      auto fwd_step = [&] {
        ds2::kernels::rnn_gru_step_forward(pre, g16, g, bias, hp, h, static_cast<uint16_t*>(x16),
                                           cand, B, H, 0, lengths, {}, s);
        return true;
      };
      auto bwd_gemm = [&] {
        return cublasGemmEx(hb, CUBLAS_OP_N, CUBLAS_OP_N, H, B, g16, &one, u, CUDA_R_16BF, h16, d16,
                            CUDA_R_16BF, g16, &one, next, CUDA_R_32F, h16, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
      };
      auto bwd_step = [&] {
        ds2::kernels::rnn_gru_step_backward(pre, g16, cand, hp, dy, carry, dpre, dg,
                                            static_cast<uint16_t*>(d16), next, B, H, 0, lengths, {},
                                            s);
        return true;
      };
      printf("H %d B %d: fwd %.2f / %.2f / %.2f | bwd %.2f / %.2f / %.2f\n", H, B,
             graph_us(s, fwd_gemm), graph_us(s, fwd_step),
             graph_us(s, [&] { return fwd_gemm() && fwd_step(); }), graph_us(s, bwd_step),
             graph_us(s, bwd_gemm), graph_us(s, [&] { return bwd_step() && bwd_gemm(); }));
      fflush(stdout);
    }
    for (void* p : {u, x16, d16}) cudaFree(p);
    for (float* p : {pre, g, dpre, dg, hp, h, cand, dy, carry, next, bias}) cudaFree(p);
  }
}
