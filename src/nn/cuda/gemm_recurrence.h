// The GEMM recurrence: one timestep of one RNN direction as a cuBLAS GEMM over the batch rows
// valid at t plus one fused step kernel (kernels/rnn.h). It runs where no persistent plan fits
// (CudaRnnLayer) and is the row `ds2 bench rnn` times beside the persistent kernels, so both call
// these functions.
//
// In bf16 the GEMMs read bf16 operands: U rounded once a pass (`u_bf16`), and the state or gradient
// rounded by the step kernel that wrote it (the `*_bf16` outputs, read by the next step's GEMM);
// products and sums stay fp32, as in the tensor-core persistent kernels. Until session 58 they
// ran cuBLAS's FAST_16BF on the fp32 arrays, which cuBLAS serves with TF32 kernels reading 4 bytes
// an element: U of H 4096 is 64 MB from HBM every step that way, 32 MB (within an H200's L2) now.
// The bf16 copies, U's and what the step kernels write, have their rows and columns padded to
// multiples of 8 with zeros (kernels/rnn.h's rnn_padded_ld): the GEMMs then run those dimensions
// padded, which at H not a multiple of 8 halves their time. Some steps' GEMMs (bf16 and fp32,
// by cell, pass and H) also run their batch rows padded where cuBLAS's default kernels are slower
// at the smaller N (gemm_recurrence_gemm_rows): every buffer they read or write then holds
// gemm_recurrence_row_capacity rows, and a clipped-ReLU forward's product goes to `product`
// apart from p, as it does in bf16 at H not a multiple of 8 (whose GEMM runs its N, H, padded).
//
//   GemmRecurrence r{handle, stream, u, u16, H, B, lengths};        // u16 null: fp32 GEMMs
//   for (t...) relu_gemm_step_forward(r, t, rows_valid[t], h_prev, h_prev16, p, P, h, h16, clip,
//                                     {p_next});   // the next step's p, or {} at the last step
//
// Every step function takes `next`, what the next step reads from HBM (kernels::RnnStepPrefetch):
// its step kernel asks L2 for it while the next step's GEMM runs (where U, as the GEMMs read it,
// takes at most half the L2; past that the prefetched rows would push U's out).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda/device_array.h"
#include "kernels/rnn.h"

namespace ds2 {

struct GemmRecurrence {
  cublasHandle_t blas;
  cudaStream_t stream;  // blas's stream: the step kernels follow its GEMMs
  const float* u;       // {G*H, H}: the hidden-side weights, G = 1 (ReLU) or 3 (GRU)
  // U rounded by round_recurrent_weight (bf16 GEMMs), or null (fp32 GEMMs, state copies unused).
  const uint16_t* u_bf16;
  int hidden;
  int batch;
  const int* lengths;  // device, {batch}: row b is valid at t < lengths[b]
  // {gemm_recurrence_row_capacity, rnn_padded_ld(H)} fp32: where a clipped-ReLU forward step
  // whose GEMM runs padded rows, or in bf16 padded columns at H not a multiple of 8, writes U
  // h_prev (null where no step does; the GRU's steps write their g, which has the capacity's
  // rows).
  float* product = nullptr;
  bool bf16() const { return u_bf16 != nullptr; }
};

// The batch rows a step's GEMM runs when `rows` are valid, in the forward's product (h_prev U^T)
// or backward-data's (dG U): `rows`, or more where cuBLAS's default kernel at `rows` ran slower
// than at the larger N on an H200 (`bash scripts/dev/gemm-batch-pad.sh`, gemm_recurrence.cpp has
// the rules and their numbers). The products of the padding rows are never read.
int gemm_recurrence_gemm_rows(int rows, int gates, int hidden, bool bf16, bool backward);
// The rows every array a step's GEMM reads or writes must hold for a batch of B (>= B), over
// both passes: the states and zero state it multiplies, the backward's gradient, carry and next,
// the GRU's hidden gates and `product`. Rows past B hold anything.
int gemm_recurrence_row_capacity(int B, int gates, int hidden, bool bf16);
// The rows past the end of a {T, B, ...} array whose steps a GEMM multiplies (the fp32 states
// and backward gradients, read in place): row_capacity - B, which the last step's padded GEMM
// reads. Their products are discarded, so the rows may hold anything.
int gemm_recurrence_extra_rows(int B, int gates, int hidden, bool bf16);

// Whether the clipped ReLU's forward steps run as one fused kernel each (kernels/rnn_fused_step.h)
// instead of the GEMM and the step kernel: bf16, batch up to 8, H past 4096, where a step is U's
// read from HBM (the layers take it at batch 3-8; at 1-2 the persistent streamed kernel runs).
// H200, `ds2 bench rnn --precision bf16 --repeats 5 --warmup 1`, forward us a step against cuDNN's
// best 16-bit: H 4608 batch 4 9.51 against 12.71, batch 8 10.57 against 12.09 (the GEMM and step
// kernel: 12.58 against 12.11, session 73); H 5120 batch 8 14.86 against 16.94 (16.98 against
// 15.85, session 74); H 6144 batch 8 21.64 against 23.64.
bool gemm_recurrence_fuses_relu_forward(int B, int hidden, bool bf16);

// Whether a step's kernel prefetches the next step's inputs (kernels::RnnStepPrefetch) on a GPU
// with `l2_bytes` of L2: where U, as the GEMMs read it (bf16 and padded, or fp32), takes at most
// half of it, so that the prefetched rows do not push U's out. H200 (60 MiB of L2), bf16, `bash
// scripts/dev/step-prefetch.sh`: 0.2-0.8 us a step faster at H 1104-3328 (U 7-25 MB; the GRU's
// backward-data at H 2048 batch 64 level), level or up to 0.4 slower at H 4608-5120 (U 42-52 MB).
bool gemm_recurrence_prefetches(int gates, int hidden, bool bf16, int64_t l2_bytes);

// Elements of U's bf16 copy {G*H, H} (G = 1 or 3) with its rows and columns padded
// (kernels::rnn_padded_ld).
int64_t recurrent_weight_bf16_size(int gates, int hidden);
// U rounded into out (recurrent_weight_bf16_size elements), the padding zero.
void round_recurrent_weight(const float* u, int gates, int hidden, uint16_t* out,
                            cudaStream_t stream);
// Elements of the backward's carry and next ({B, H} each, rows kernels::rnn_padded_ld(H) apart,
// gemm_recurrence_row_capacity rows).
int64_t gemm_recurrence_carry_size(int B, int gates, int hidden, bool bf16);

// The bf16 copies one direction's GEMM recurrence reads, for code that runs it outside
// CudaRnnLayer (the benchmarks, the tests' references; the layer keeps its own for both
// directions, shared with dU): U rounded, a zero state, the states {T, B, H} that the forward's
// step kernels round as they write them, and one step's gradient {B, G*H} for backward-data, each
// with room for gemm_recurrence_row_capacity rows, and the clipped ReLU forward's `product`. In
// fp32 only `product` is allocated; the bf16 pointers are null.
//
//   GemmRecurrenceBf16 ops(bf16, u, /*gates=*/1, H, T, B, stream);
//   GemmRecurrence r{handle, stream, u, ops.u(), H, B, lengths, ops.product()};
//   relu_gemm_step_forward(r, t, B, h_prev, ops.state_before(t_prev), p, P, h, ops.state(t), clip);
class GemmRecurrenceBf16 {
 public:
  GemmRecurrenceBf16(bool bf16, const float* u, int gates, int hidden, int T, int B,
                     cudaStream_t stream);
  const uint16_t* u() const { return bf16_ ? u_.data() : nullptr; }
  // The state written at step t (0 <= t < T).
  uint16_t* state(int t) { return bf16_ ? states_.data() + int64_t{t} * row_ : nullptr; }
  // What step t's product multiplies, given the step before it: that state, or the zero state
  // where t_prev is outside [0, T) (the first step of either direction).
  const uint16_t* state_before(int t_prev) const {
    if (!bf16_) return nullptr;
    return t_prev < 0 || t_prev >= T_ ? zero_.data() : states_.data() + int64_t{t_prev} * row_;
  }
  uint16_t* step_grad() { return bf16_ ? step_grad_.data() : nullptr; }
  float* product() { return product_.capacity() > 0 ? product_.data() : nullptr; }

 private:
  bool bf16_;
  int T_;
  int64_t row_;  // B * H
  DeviceArray<uint16_t> u_, states_, zero_, step_grad_;
  DeviceArray<float> product_;
};

// The step functions' GEMMs read gemm_recurrence_gemm_rows rows of what they multiply (h_prev,
// h_prev_bf16, dp, dp_bf16, dg, dg_bf16): past B where a step pads, so those arrays hold
// gemm_recurrence_row_capacity rows, or, read in place from a {T, B, ...} array, that array
// gemm_recurrence_extra_rows more at its end.
//
// Clipped ReLU, step t with `rows` batch rows valid somewhere at t: p += h_prev U^T, then
// h = clipped ReLU of p with the padding mask. In bf16 the GEMM reads h_prev_bf16 and the step
// writes h_bf16 ({B, H} each); in fp32 they are ignored (may be null). p: {B, ld_p}.
void relu_gemm_step_forward(const GemmRecurrence& r, int t, int rows, const float* h_prev,
                            const uint16_t* h_prev_bf16, float* p, int ld_p, float* h,
                            uint16_t* h_bf16, float clip, const kernels::RnnStepPrefetch& next);
// Clipped ReLU backward step: dp = dL/dpre from dy + carry (kernels::rnn_relu_step_backward),
// then next = dp U over the valid rows. In bf16 dp is rounded into dp_bf16 ({B, H}) for the GEMM.
// carry and next: gemm_recurrence_carry_size elements each, carry zero before the first step.
void relu_gemm_step_backward(const GemmRecurrence& r, int t, int rows, const float* h,
                             const float* dy, const float* carry, float* dp, int ld_p,
                             uint16_t* dp_bf16, float* next, float clip,
                             const kernels::RnnStepPrefetch& next_step);

// GRU step: g = h_prev U^T ({row capacity, 3H}, rows kernels::rnn_padded_ld(3H) apart), then the
// cell (kernels::rnn_gru_step_forward).
void gru_gemm_step_forward(const GemmRecurrence& r, int t, int rows, const float* h_prev,
                           const uint16_t* h_prev_bf16, float* p, int ld_p, float* g,
                           const float* bias_h, float* h, uint16_t* h_bf16, float* candidate,
                           const kernels::RnnStepPrefetch& next);
// GRU backward step: the cell's gradients (kernels::rnn_gru_step_backward), then next += dg U.
// In bf16 dg is rounded into dg_bf16 ({B, 3H}) for the GEMM.
void gru_gemm_step_backward(const GemmRecurrence& r, int t, int rows, const float* gates, int ld_p,
                            const float* candidate, const float* h_prev, const float* dy,
                            const float* carry, float* dp, float* dg, uint16_t* dg_bf16,
                            float* next, const kernels::RnnStepPrefetch& next_step);

}  // namespace ds2
