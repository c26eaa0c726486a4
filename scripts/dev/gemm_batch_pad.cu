// Dev measurement, not part of the build: the bf16 GEMM recurrence's per-step product
// (nn/cuda/gemm_recurrence.h, clipped ReLU: column-major C {H, N} (+)= op(U) X, U bf16 {H, H}, X
// bf16 {H, N}, fp32 C) with cuBLAS's default algorithm at N batch rows, and the same product run
// at N padded to a multiple of 16, of 32 and to 64 (gemm_recurrence_gemm_rows' rule). Forward
// (op T, beta 1) and backward-data (op N, beta 0); us a product, a CUDA graph of 200 calls, median
// of 5 replays. Run on the GPU machine: bash gemm-batch-pad.sh.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "graph_timing.cuh"

int main() {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cublasHandle_t h;
  CHECK(cublasCreate(&h));
  CHECK(cublasSetStream(h, s));
  const int Hs[] = {2304, 2560, 2688, 2816, 3072, 3328, 3584, 4096, 4608, 5120, 6144};
  const int Ns[] = {16, 20, 24, 32, 33, 40, 41, 44, 48, 49, 52, 56, 57, 60, 64};
  for (int H : Hs) {
    void *u, *x, *c;
    CHECK(cudaMalloc(&u, size_t(H) * H * 2));
    CHECK(cudaMalloc(&x, size_t(H) * 128 * 2));
    CHECK(cudaMalloc(&c, size_t(H) * 128 * 4));
    cudaMemset(u, 0x3c, size_t(H) * H * 2);
    cudaMemset(x, 0x3c, size_t(H) * 128 * 2);
    cudaMemset(c, 0, size_t(H) * 128 * 4);
    const float one = 1, zero = 0;
    for (int bwd = 0; bwd < 2; ++bwd) {
      printf("H %d %s:", H, bwd ? "bwd" : "fwd");
      auto run = [&](int N) {
        return graph_us(s, [&] {
          return cublasGemmEx(h, bwd ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, H, N, H, &one, u,
                              CUDA_R_16BF, H, x, CUDA_R_16BF, H, bwd ? &zero : &one, c, CUDA_R_32F,
                              H, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
        });
      };
      for (int n : Ns) printf(" %d:%.2f", n, run(n));
      printf("\n  padded to 16/32/64:");
      for (int n : Ns) {
        const int p16 = (n + 15) / 16 * 16, p32 = (n + 31) / 32 * 32;
        printf(" %d:%.2f/%.2f/%.2f", n, run(p16), run(p32), run(64));
      }
      printf("\n");
      fflush(stdout);
    }
    cudaFree(u);
    cudaFree(x);
    cudaFree(c);
  }
}
