// Dev measurement, not part of the build: the bf16 GEMM recurrence (nn/cuda/gemm_recurrence.h) as
// CudaRnnLayer walks it, each step's inputs and outputs at their own addresses over T steps (the
// projection {T, B, G H} written long before, so read from HBM), with the library's step kernels
// (kernels/rnn.cu) told the next step's inputs to prefetch into L2 (kernels::RnnStepPrefetch) or
// told nothing. us a step, one graph of T steps, median of 5 replays:
//   GRU forward and backward-data;
//   clipped ReLU forward, its GEMM adding into p (beta 1) or writing a product the step adds (the
//   padded rows' form), and backward-data.
// Measured on the way to it (session 74, H200): the library's step kernels before they ran on a
// 2-D grid (a 64-bit division a thread) were 0.3-0.8 us a step slower than the grid alone; a
// prefetch kernel on a side branch of the graph ran 0.6-1.2 us a step faster at GRU H 1104 and
// 0.2-4 us slower from H 1536. Run on the GPU machine: bash step-prefetch.sh [gru] (gru: the
// GRU's shapes only).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "graph_timing.cuh"
#include "kernels/rnn.h"

using ds2::kernels::rnn_padded_ld;
using ds2::kernels::RnnStepPrefetch;

int main(int argc, char** argv) {
  const bool gru_only = argc > 1 && std::string(argv[1]) == "gru";
  const BlasStream bs = blas_stream();
  cudaStream_t s = bs.stream;
  cublasHandle_t hb = bs.blas;
  const int T = kCalls;  // graph_us captures kCalls calls: a call is one step
  const int* lengths = all_valid_lengths(64);
  const float one = 1, zero_f = 0;
  struct Shape {
    int gates, H, B;
  };
  std::vector<Shape> shapes;
  for (int H : {1104, 1296, 1536, 1904, 2048})
    for (int B : {12, 40, 64}) shapes.push_back({3, H, B});
  if (!gru_only)
    for (int H : {2816, 3328, 4608, 5120})
      for (int B : {8, 24, 40, 48}) shapes.push_back({1, H, B});
  printf("T %d, us a step, each without / with the next step's inputs prefetched\n", T);
  printf("GRU: fwd | bwd.  ReLU: fwd (beta-1 GEMM) | fwd (product) | bwd\n");
  for (const Shape& sh : shapes) {
    const int G = sh.gates, H = sh.H, B = sh.B;
    const int h16 = rnn_padded_ld(H), g16 = rnn_padded_ld(G * H);
    const int64_t gate_step = int64_t{B} * g16, h_step = int64_t{B} * H;
    void *u, *states16, *d16;
    float *pre, *g, *bias, *h, *cand, *dy, *carry, *next, *dpre, *dg, *zero;
    CHECK(cudaMalloc(&u, size_t(g16) * h16 * 2));
    CHECK(cudaMalloc(&states16, size_t(T + 1) * B * h16 * 2));
    CHECK(cudaMalloc(&d16, size_t(B) * g16 * 2));
    for (float** p : {&pre, &dpre, &dg}) CHECK(cudaMalloc(p, (T + 1) * gate_step * 4));
    CHECK(cudaMalloc(&g, gate_step * 4));
    for (float** p : {&h, &cand, &dy}) CHECK(cudaMalloc(p, (T + 1) * h_step * 4));
    for (float** p : {&carry, &next, &zero}) CHECK(cudaMalloc(p, int64_t{B} * h16 * 4));
    CHECK(cudaMalloc(&bias, size_t(g16) * 4));
    // Small values (bytes 0x3c: bf16 ~0.0115, fp32 ~0.0115), no overflow anywhere.
    CHECK(cudaMemset(u, 0x3c, size_t(g16) * h16 * 2));
    CHECK(cudaMemset(states16, 0x3c, size_t(T + 1) * B * h16 * 2));
    CHECK(cudaMemset(d16, 0x3c, size_t(B) * g16 * 2));
    for (float* p : {pre, dpre, dg}) CHECK(cudaMemset(p, 0x3c, (T + 1) * gate_step * 4));
    for (float* p : {h, cand, dy}) CHECK(cudaMemset(p, 0x3c, (T + 1) * h_step * 4));
    for (float* p : {carry, next, zero}) CHECK(cudaMemset(p, 0, int64_t{B} * h16 * 4));
    CHECK(cudaMemset(g, 0, gate_step * 4));
    CHECK(cudaMemset(bias, 0x3c, size_t(g16) * 4));
    auto u16 = [&](int t) { return static_cast<uint16_t*>(states16) + int64_t{t} * B * h16; };
    int calls = 0;
    auto gemm = [&](bool trans, int M, int K, const void* x, float beta, float* c, int ldc) {
      return cublasGemmEx(hb, trans ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, M, B, K, &one, u,
                          CUDA_R_16BF, h16, x, CUDA_R_16BF, K, beta ? &one : &zero_f, c, CUDA_R_32F,
                          ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
    };
    auto time = [&](const std::function<bool()>& step) {
      calls = 0;
      return graph_us(s, step);
    };
    std::vector<float> r;
    if (G == 3) {
      for (int pf = 0; pf < 2; ++pf)
        r.push_back(time([&] {
          const int t = calls++;
          float* p = pre + t * gate_step;
          const float* hp = t ? h + (t - 1) * h_step : zero;
          if (!gemm(true, 3 * H, h16, u16(t), 0, g, g16)) return false;
          RnnStepPrefetch next;
          if (pf) next.pre = p + gate_step;
          ds2::kernels::rnn_gru_step_forward(p, g16, g, bias, hp, h + t * h_step, u16(t + 1),
                                             cand + t * h_step, B, H, 0, lengths, next, s);
          return true;
        }));
      for (int pf = 0; pf < 2; ++pf) {
        float *c = carry, *nx = next;
        r.push_back(time([&] {
          const int t = T - calls++;  // T down to 1: step t - 1's inputs exist for every t
          RnnStepPrefetch in_next;
          if (pf)
            in_next = {pre + (t - 1) * gate_step, t > 1 ? h + (t - 2) * h_step : zero,
                       dy + (t - 1) * h_step, cand + (t - 1) * h_step};
          ds2::kernels::rnn_gru_step_backward(
              pre + t * gate_step, g16, cand + t * h_step, h + (t - 1) * h_step, dy + t * h_step, c,
              dpre + t * gate_step, dg + t * gate_step, static_cast<uint16_t*>(d16), nx, B, H, 0,
              lengths, in_next, s);
          if (!gemm(false, H, g16, d16, 1, nx, h16)) return false;
          std::swap(c, nx);
          return true;
        }));
      }
      printf("GRU H %d B %d: fwd %.2f / %.2f | bwd %.2f / %.2f\n", H, B, r[0], r[1], r[2], r[3]);
    } else {
      for (int kind = 0; kind < 4; ++kind)
        r.push_back(time([&] {
          const int t = calls++;
          float* p = pre + t * gate_step;
          const bool product = kind >= 2;
          if (!gemm(true, H, h16, u16(t), product ? 0 : 1, product ? g : p, product ? h16 : g16))
            return false;
          RnnStepPrefetch next;
          if (kind % 2 == 1) next.pre = p + gate_step;
          ds2::kernels::rnn_relu_step_forward(p, g16, product ? g : nullptr, h16, h + t * h_step,
                                              u16(t + 1), B, H, 0, lengths, 20.0f, next, s);
          return true;
        }));
      for (int pf = 0; pf < 2; ++pf) {
        float *c = carry, *nx = next;
        r.push_back(time([&] {
          const int t = T - calls++;
          RnnStepPrefetch in_next;
          if (pf) in_next = {nullptr, h + (t - 1) * h_step, dy + (t - 1) * h_step};
          ds2::kernels::rnn_relu_step_backward(
              h + t * h_step, dy + t * h_step, c, dpre + t * gate_step, g16,
              static_cast<uint16_t*>(d16), nx, B, H, 0, lengths, 20.0f, in_next, s);
          if (!gemm(false, H, h16, d16, 0, nx, h16)) return false;
          std::swap(c, nx);
          return true;
        }));
      }
      printf("ReLU H %d B %d: fwd %.2f / %.2f | product %.2f / %.2f | bwd %.2f / %.2f\n", H, B,
             r[0], r[1], r[2], r[3], r[4], r[5]);
    }
    fflush(stdout);
    for (void* p : {u, states16, d16}) cudaFree(p);
    for (float* p : {pre, g, bias, h, cand, dy, carry, next, dpre, dg, zero}) cudaFree(p);
  }
}
