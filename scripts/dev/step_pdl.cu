// Dev measurement, not part of the build: what the GEMM recurrence's step kernel adds after its
// cuBLAS bf16 product in a CUDA graph (nn/cuda/gemm_recurrence.h), and whether launching it as a
// programmatic dependent launch (cudaLaunchAttributeProgrammaticStreamSerialization, the kernel
// waiting in griddepcontrol.wait) hides its launch behind the GEMM. A stand-in step kernel (clipped
// ReLU of pre + product, h and its bf16 copy written); us a step, a graph of 200 steps, median of
// 5 replays. Run on the GPU machine: bash step-pdl.sh.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "graph_timing.cuh"

template <bool kWait>
__global__ void step(const float* __restrict__ pre, const float* __restrict__ prod,
                     float* __restrict__ h, __nv_bfloat16* __restrict__ h16, int n, int H, int ld) {
  if (kWait) asm volatile("griddepcontrol.wait;" ::: "memory");
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    int b = i / H, k = i % H;
    float v = fminf(fmaxf(pre[i] + prod[b * ld + k], 0.f), 20.f);
    h[i] = v;
    h16[b * ld + k] = __float2bfloat16(v);
  }
}
int main() {
  const BlasStream bs = blas_stream();
  cudaStream_t s = bs.stream;
  cublasHandle_t hb = bs.blas;
  for (int H : {1024, 2816, 4096})
    for (int N : {16, 48, 64}) {
      void *u, *x, *c;
      float *pre, *h;
      CHECK(cudaMalloc(&u, size_t(H) * H * 2));
      CHECK(cudaMalloc(&x, size_t(H) * 64 * 2));
      CHECK(cudaMalloc(&c, size_t(H) * 64 * 4));
      CHECK(cudaMalloc(&pre, size_t(H) * 64 * 4));
      CHECK(cudaMalloc(&h, size_t(H) * 64 * 4));
      cudaMemset(u, 0x3c, size_t(H) * H * 2);
      cudaMemset(x, 0, size_t(H) * 64 * 2);
      cudaMemset(pre, 0, size_t(H) * 64 * 4);
      const float one = 1, zero = 0;
      const int n = N * H, blocks = std::min(1024, (n + 255) / 256);
      auto gemm = [&] {
        return cublasGemmEx(hb, CUBLAS_OP_T, CUBLAS_OP_N, H, N, H, &one, u, CUDA_R_16BF, H, x,
                            CUDA_R_16BF, H, &zero, c, CUDA_R_32F, H, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
      };
      const float g = graph_us(s, gemm);
      const float plain = graph_us(s, [&] {
        if (!gemm()) return false;
        step<false><<<blocks, 256, 0, s>>>(pre, (float*)c, h, (__nv_bfloat16*)x, n, H, H);
        return cudaGetLastError() == cudaSuccess;
      });
      const float pdl = graph_us(s, [&] {
        if (!gemm()) return false;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = blocks;
        cfg.blockDim = 256;
        cfg.stream = s;
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = at;
        cfg.numAttrs = 1;
        return cudaLaunchKernelEx(&cfg, step<true>, (const float*)pre, (const float*)c, h,
                                  (__nv_bfloat16*)x, n, H, H) == cudaSuccess;
      });
      printf("H %d N %d: gemm %.2f  gemm+step %.2f  gemm+step(PDL) %.2f\n", H, N, g, plain, pdl);
      fflush(stdout);
      cudaFree(u);
      cudaFree(x);
      cudaFree(c);
      cudaFree(pre);
      cudaFree(h);
    }
}
