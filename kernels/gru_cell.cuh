// The GRU cell shared by the GRU kernels (the GEMM recurrence's step kernels, kernels/rnn.cu, the
// persistent recurrence, kernels/persistent_gru.cu, and in its fast form the tensor-core forward,
// kernels/persistent_rnn_mma.cu), in PyTorch's formulation with gate order
// r, z, n: one neuron of one frame, with `a` the input side (BN(W x) + b_x) and `g` the hidden side
// (U h_prev + b_h) of each gate. Sums in the CPU reference's order (nn/rnn_layer.cpp).
//
//   GruGates f = gru_cell_forward(a, g, b, h_prev);     // a, g, b: {r, z, n} each; f.h, f.r, ...
//   GruGates f = gru_cell_forward_fast(a, g, b, h_prev);  // approximate exp and reciprocal
//   GruGrads d = gru_cell_backward(dh, r, z, n, hn, h_prev);  // core/gru_cell_backward.h
#pragma once

#include "core/gru_cell_backward.h"  // gru_cell_backward, GruGrads: shared with the CPU layer

namespace ds2::kernels {

__device__ __forceinline__ float sigmoidf(float x) {
  return 1.0f / (1.0f + expf(-x));
}

struct GruGates {
  float r, z, n;  // the gates, which backward reads
  float hn;       // g_n + b_n: what r multiplied, which backward reads
  float h;        // the output
};

// One value per gate r, z, n.
struct GruTriple {
  float r, z, n;
};

// a: input side, g: U h_prev, b: b_h; r = sigmoid((a + g) + b) and so on.
__device__ __forceinline__ GruGates gru_cell_forward(GruTriple a, GruTriple g, GruTriple b,
                                                     float h_prev) {
  GruGates o;
  o.r = sigmoidf(a.r + g.r + b.r);
  o.z = sigmoidf(a.z + g.z + b.z);
  o.hn = g.n + b.n;
  o.n = tanhf(a.n + o.r * o.hn);
  o.h = (1.0f - o.z) * o.n + o.z * h_prev;
  return o;
}

// The same cell with the hardware's approximate exp and reciprocal (__expf: ex2.approx, within
// 2 + 1.16 |x| ulp; __fdividef: within 2 ulp), tanh as 1 - 2 / (1 + e^2x): ~1e-6 relative (tanh
// near 0: ~2e-7 absolute) where gru_cell_forward is within a few ulp. For the persistent
// tensor-core forward, whose step is one chain of latencies and whose products are no closer
// (fp16 halves, ~2^-22): H200, us a step, batch 1, kernels/NOTES.md "Session 49": H 256 1.25-1.27
// -> 1.10-1.11, H 1024 1.59-1.62 -> 1.46-1.49, H 1280 1.97-2.00 -> 1.78-1.81. The limits hold:
// e^x = inf gives 1 / inf = 0 and tanh -1 or 1, NaN stays NaN.
__device__ __forceinline__ GruGates gru_cell_forward_fast(GruTriple a, GruTriple g, GruTriple b,
                                                          float h_prev) {
  GruGates o;
  o.r = __fdividef(1.0f, 1.0f + __expf(-(a.r + g.r + b.r)));
  o.z = __fdividef(1.0f, 1.0f + __expf(-(a.z + g.z + b.z)));
  o.hn = g.n + b.n;
  o.n = 1.0f - __fdividef(2.0f, 1.0f + __expf(2.0f * (a.n + o.r * o.hn)));
  o.h = (1.0f - o.z) * o.n + o.z * h_prev;
  return o;
}

}  // namespace ds2::kernels
