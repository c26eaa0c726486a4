// Dev measurement, not part of the build: the bf16 GEMM recurrence (nn/cuda/gemm_recurrence.h)
// walked as CudaRnnLayer walks it (each step's inputs and outputs at their own addresses over T
// steps, the library's step kernels), where U is too large to stay in L2 on its own (H 4096-6144
// for the clipped ReLU, U 34-75 MB in bf16), with a persisting L2 access-policy window over U:
//   none      no window;
//   stream    the window set on the stream before capture (does capture carry it?);
//   node r    the window set on every kernel node of the captured graph, hitRatio r (the share of
//             U's lines that persist; the set-aside is the device's maximum);
//   node+pf   the fitting ratio, and the step kernels prefetching the next step's inputs.
// us a step, one graph of T steps, median of 5 replays. Run on the GPU machine:
//   bash scripts/dev/l2-window.sh [H...]
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "graph_timing.cuh"
#include "kernels/rnn.h"

using ds2::kernels::rnn_padded_ld;
using ds2::kernels::RnnStepPrefetch;

namespace {

cudaAccessPolicyWindow window_over(const void* base, size_t bytes, float hit_ratio) {
  cudaAccessPolicyWindow w = {};
  w.base_ptr = const_cast<void*>(base);
  w.num_bytes = bytes;
  w.hitRatio = hit_ratio;
  w.hitProp = cudaAccessPropertyPersisting;
  w.missProp = cudaAccessPropertyStreaming;
  return w;
}

// Sets `w` on every kernel node of g.
void set_node_windows(cudaGraph_t g, const cudaAccessPolicyWindow& w) {
  size_t n = 0;
  CHECK(cudaGraphGetNodes(g, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  CHECK(cudaGraphGetNodes(g, nodes.data(), &n));
  cudaKernelNodeAttrValue v = {};
  v.accessPolicyWindow = w;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    CHECK(cudaGraphNodeGetType(node, &type));
    if (type == cudaGraphNodeTypeKernel)
      CHECK(cudaGraphKernelNodeSetAttribute(node, cudaKernelNodeAttributeAccessPolicyWindow, &v));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const BlasStream bs = blas_stream();
  cudaStream_t s = bs.stream;
  cublasHandle_t hb = bs.blas;
  int device = 0, set_aside_max = 0, window_max = 0, l2 = 0;
  CHECK(cudaGetDevice(&device));
  CHECK(cudaDeviceGetAttribute(&set_aside_max, cudaDevAttrMaxPersistingL2CacheSize, device));
  CHECK(cudaDeviceGetAttribute(&window_max, cudaDevAttrMaxAccessPolicyWindowSize, device));
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, set_aside_max));
  size_t set_aside = 0;
  CHECK(cudaDeviceGetLimit(&set_aside, cudaLimitPersistingL2CacheSize));
  printf("L2 %d B, persisting set-aside max %d (set %zu), window max %d\n", l2, set_aside_max,
         set_aside, window_max);
  const int T = kCalls;
  const int* lengths = all_valid_lengths(64);
  const float one = 1, zero_f = 0;
  std::vector<int> Hs = {4096, 4608, 5120, 6144};
  if (argc > 1) {
    Hs.clear();
    for (int i = 1; i < argc; ++i) Hs.push_back(std::atoi(argv[i]));
  }
  printf("T %d, ReLU bf16, us a step: none | stream | node 0.5 | node 1.0 | node fit | node+pf\n",
         T);
  for (int H : Hs)
    for (int B : {8, 24, 48, 64}) {
      const int h16 = rnn_padded_ld(H);
      const int64_t step = int64_t{B} * h16;
      const size_t u_bytes = size_t(h16) * h16 * 2;
      void *u, *states16, *d16;
      float *pre, *g, *h, *dy, *carry, *next, *dpre;
      CHECK(cudaMalloc(&u, u_bytes));
      CHECK(cudaMalloc(&states16, size_t(T + 1) * step * 2));
      CHECK(cudaMalloc(&d16, size_t(step) * 2));
      for (float** p : {&pre, &dpre, &h, &dy}) CHECK(cudaMalloc(p, (T + 1) * step * 4));
      for (float** p : {&g, &carry, &next}) CHECK(cudaMalloc(p, step * 4));
      // Small values (bytes 0x3c: bf16 ~0.0115, fp32 ~0.0115), no overflow anywhere.
      CHECK(cudaMemset(u, 0x3c, u_bytes));
      CHECK(cudaMemset(states16, 0x3c, size_t(T + 1) * step * 2));
      CHECK(cudaMemset(d16, 0x3c, size_t(step) * 2));
      for (float* p : {pre, dpre, h, dy}) CHECK(cudaMemset(p, 0x3c, (T + 1) * step * 4));
      for (float* p : {g, carry, next}) CHECK(cudaMemset(p, 0, step * 4));
      auto u16 = [&](int t) { return static_cast<uint16_t*>(states16) + int64_t{t} * step; };
      int calls = 0;
      auto gemm = [&](bool trans, const void* x, float beta, float* c) {
        return cublasGemmEx(hb, trans ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, h16, B, h16, &one,
                            u, CUDA_R_16BF, h16, x, CUDA_R_16BF, h16, beta ? &one : &zero_f, c,
                            CUDA_R_32F, h16, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
      };
      const size_t bytes = std::min<size_t>(u_bytes, window_max);
      const float fit = std::min(1.0f, float(set_aside) / float(bytes));
      // variant: 0 none, 1 stream, 2-4 node at 0.5 / 1.0 / fit, 5 node fit + prefetch.
      auto run = [&](bool backward, int variant) {
        const float ratio = variant == 2 ? 0.5f : variant == 3 ? 1.0f : fit;
        cudaStreamAttrValue sv = {};
        if (variant == 1) sv.accessPolicyWindow = window_over(u, bytes, fit);
        CHECK(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &sv));
        CHECK(cudaCtxResetPersistingL2Cache());
        float *c = carry, *nx = next;
        calls = 0;
        const float us = graph_us(
            s,
            [&] {
              const bool pf = variant == 5;
              if (!backward) {
                const int t = calls++;
                float* p = pre + t * step;
                if (!gemm(true, u16(t), 1, p)) return false;
                RnnStepPrefetch in_next;
                if (pf) in_next.pre = p + step;
                ds2::kernels::rnn_relu_step_forward(p, h16, nullptr, h16, h + t * step, u16(t + 1),
                                                    B, H, 0, lengths, 20.0f, in_next, s);
                return true;
              }
              const int t = T - calls++;
              RnnStepPrefetch in_next;
              if (pf) in_next = {nullptr, h + (t - 1) * step, dy + (t - 1) * step};
              ds2::kernels::rnn_relu_step_backward(h + t * step, dy + t * step, c, dpre + t * step,
                                                   h16, static_cast<uint16_t*>(d16), nx, B, H, 0,
                                                   lengths, 20.0f, in_next, s);
              if (!gemm(false, d16, 0, nx)) return false;
              std::swap(c, nx);
              return true;
            },
            [&](cudaGraph_t graph) {
              if (variant >= 2) set_node_windows(graph, window_over(u, bytes, ratio));
            });
        return us;
      };
      for (int backward = 0; backward < 2; ++backward) {
        printf("H %d B %d %s (U %.1f MB, fit %.2f):", H, B, backward ? "bwd" : "fwd", u_bytes / 1e6,
               fit);
        for (int variant = 0; variant < 6; ++variant) printf(" %.2f", run(backward, variant));
        printf("\n");
        fflush(stdout);
      }
      cudaStreamAttrValue none = {};
      CHECK(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &none));
      for (void* p : {u, states16, d16}) cudaFree(p);
      for (float* p : {pre, g, h, dy, carry, next, dpre}) cudaFree(p);
    }
}
