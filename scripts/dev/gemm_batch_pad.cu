// Dev measurement, not part of the build: the GEMM recurrence's per-step product
// (nn/cuda/gemm_recurrence.h) with cuBLAS's default algorithm at N batch rows, and the same
// product run at N padded to a multiple of 8, 16, 32 and to 64 (gemm_recurrence_gemm_rows' rule).
// Column-major, U {G H, H} with G the cell's gates (1 clipped ReLU, 3 GRU):
//   forward        C {G H, N}  = op_T(U) X, X {H, N}     (beta 1 for the clipped ReLU, 0 for GRU)
//   backward-data  C {H, N}    = U X,       X {G H, N}   (beta 0 for the clipped ReLU, 1 for GRU)
// bf16 operands with fp32 C and compute (cublasGemmEx), or fp32 throughout (cublasSgemm, no TF32),
// as the layers run them. us a product, a CUDA graph of 200 calls, median of 5 replays.
// Run on the GPU machine: bash gemm-batch-pad.sh [relu|gru] [bf16|fp32] [dense H...] (dense:
// every N 1-64 unpadded at the listed H).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "graph_timing.cuh"

int main(int argc, char** argv) {
  const bool gru = argc > 1 && std::strcmp(argv[1], "gru") == 0;
  const bool fp32 = argc > 2 && std::strcmp(argv[2], "fp32") == 0;
  const int G = gru ? 3 : 1;
  const BlasStream bs = blas_stream();
  cudaStream_t s = bs.stream;
  cublasHandle_t h = bs.blas;
  // The hidden sizes where each kind of layer runs the GEMM recurrence at some batch.
  std::vector<int> Hs;
  if (gru)
    Hs = fp32 ? std::vector<int>{512, 768, 1024, 1536, 2048, 2560}
              : std::vector<int>{1104, 1296, 1536, 1704, 1904, 2048, 2560};
  else
    Hs = fp32 ? std::vector<int>{1536, 2048, 2560, 3072, 3584, 4096, 5120, 6144}
              : std::vector<int>{2304, 2560, 2688, 2816, 3072, 3328, 3584, 4096, 4608, 5120, 6144};
  // dense: every N from 1 to 64 as is, at the hidden sizes listed after it (for a rule's table).
  const bool dense = argc > 3 && std::strcmp(argv[3], "dense") == 0;
  if (dense) {
    Hs.clear();
    for (int i = 4; i < argc; ++i) Hs.push_back(std::atoi(argv[i]));
  }
  std::vector<int> Ns = {1,  2,  3,  4,  5,  8,  9,  12, 16, 17, 20, 24, 28,
                         32, 33, 40, 41, 44, 48, 49, 52, 56, 57, 60, 64};
  if (dense) {
    Ns.clear();
    for (int n = 1; n <= 64; ++n) Ns.push_back(n);
  }
  const size_t elem = fp32 ? 4 : 2;
  for (int H : Hs) {
    void *u, *x, *c;
    CHECK(cudaMalloc(&u, size_t(G) * H * H * elem));
    CHECK(cudaMalloc(&x, size_t(G) * H * 128 * elem));
    CHECK(cudaMalloc(&c, size_t(G) * H * 128 * 4));
    cudaMemset(u, 0x3c, size_t(G) * H * H * elem);
    cudaMemset(x, 0x3c, size_t(G) * H * 128 * elem);
    cudaMemset(c, 0, size_t(G) * H * 128 * 4);
    for (int bwd = 0; bwd < 2; ++bwd) {
      printf("%s %s H %d %s:", gru ? "gru" : "relu", fp32 ? "fp32" : "bf16", H,
             bwd ? "bwd" : "fwd");
      const float one = 1, zero = 0;
      const float* beta = (bwd != 0) == gru ? &one : &zero;
      const int M = bwd ? H : G * H, K = bwd ? G * H : H;
      const cublasOperation_t op_u = bwd ? CUBLAS_OP_N : CUBLAS_OP_T;
      const int ld_u = H;          // U is {G H, H} row-major, column-major {H, G H}
      std::map<int, float> timed;  // each N once: the padded forms share most of them
      auto run = [&](int N) {
        auto it = timed.find(N);
        if (it != timed.end()) return it->second;
        return timed[N] = graph_us(s, [&] {
                 if (fp32)
                   return cublasSgemm(h, op_u, CUBLAS_OP_N, M, N, K, &one, static_cast<float*>(u),
                                      ld_u, static_cast<float*>(x), K, beta, static_cast<float*>(c),
                                      M) == CUBLAS_STATUS_SUCCESS;
                 return cublasGemmEx(h, op_u, CUBLAS_OP_N, M, N, K, &one, u, CUDA_R_16BF, ld_u, x,
                                     CUDA_R_16BF, K, beta, c, CUDA_R_32F, M, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
               });
      };
      if (dense) {
        for (int n : Ns) printf(" %d:%.2f", n, run(n));
        printf("\n");
        fflush(stdout);
        continue;
      }
      printf("\n  N: as is / padded to 8 / 16 / 32 / 64\n ");
      for (int n : Ns) {
        const int p8 = (n + 7) / 8 * 8, p16 = (n + 15) / 16 * 16, p32 = (n + 31) / 32 * 32;
        printf(" %d:%.2f/%.2f/%.2f/%.2f/%.2f", n, run(n), run(p8), run(p16), run(p32), run(64));
      }
      printf("\n");
      fflush(stdout);
    }
    cudaFree(u);
    cudaFree(x);
    cudaFree(c);
  }
}
