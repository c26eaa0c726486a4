// Fused elementwise kernels of the GEMM RNN (nn/cuda/rnn_layer_cuda.h): one launch per timestep
// and direction finishes what the recurrent GEMM started (activation, gates, padding mask), and
// one per step of the backward computes the activation derivative. The CPU reference is
// nn/rnn_layer.cpp (RnnLayer), against which tests/nn/cuda/rnn_layer_cuda_test.cpp checks the
// whole layer.
//
// Step pointers address timestep t of one direction: `pre` is that step's {B, ld_pre} rows of the
// projection (already offset to the direction's columns), `lengths` the device lengths; row b is
// valid when t < lengths[b]. Invalid rows get h = 0 and zero gradients, so padding never reaches
// a valid frame. The `*_bf16` outputs, where not null, receive a bf16 copy (nearest even, as
// core/bf16.h) of what the next step's recurrent GEMM multiplies, so that in bf16 precision it
// reads half the bytes (nn/cuda/gemm_recurrence.h).
//
// What a recurrent GEMM reads or writes has rows rnn_padded_ld(cols) apart, the padding columns
// zero: the `*_bf16` copies ({B, H}, or {B, 3H} for the GRU's gates), the GRU's hidden gates, and
// the backward's carry and next ({B, H} each). The step kernels write zeros into the padding of
// what they write (next's as well), so that cuBLAS can run every dimension padded to a multiple
// of 8 (nn/cuda/gemm_recurrence.cpp).
//
// Each step kernel also asks L2 for the next step's inputs that live in HBM (`next`, a thread its
// own elements; null pointers: none): the projection rows and the forward's outputs were written
// long before the step that reads them, and the step kernel's one round of loads is its critical
// path. The next step's GEMM then runs while they arrive (H200, a bf16 GEMM-recurrence step of the
// GRU at H 1104 batch 40: 7.56 us with the former 1-D grid, 7.33 on the 2-D grid, 6.63 with the
// prefetch; clipped ReLU H 2816 batch 48 8.94 -> 8.61; `bash scripts/dev/step-prefetch.sh`).
//
//   kernels::rnn_relu_step_forward(pre_t, P, nullptr, 0, h_t, nullptr, B, H, t, lengths, clip,
//                                  {pre_t + B * P}, stream);
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ds2::kernels {

// `cols` rounded up to a multiple of 8. cuBLAS's bf16 GEMMs run 2.6-3.7x slower where a dimension
// is not a multiple of 8 (H200, CUDA graphs, scripts/dev/bf16-gemm-pitch.sh: at H 1700 batch 16
// the GRU step's forward GEMM 13.64 us, 5.18 with N and K padded to 5104 and 1704, as at H 1704;
// backward-data's 16.98 / 8.35). Padding only the rows' pitch, or only one of N and K, did not
// help.
constexpr int rnn_padded_ld(int cols) {
  return (cols + 7) / 8 * 8;
}

// pre[r, c] += (c < cols ? bias0[c] : bias1[c - cols]) for a {rows, D * cols} array (D = 1 when
// bias1 is null): the input-side biases of both directions in one pass.
void rnn_add_input_bias(float* pre, int64_t rows, int cols, const float* bias0, const float* bias1,
                        cudaStream_t stream);

// What the next step's kernel reads from HBM, at its own offsets: its `pre` rows (ld_pre apart, as
// this step's), the state it reads (the clipped ReLU's backward: h; the GRU's backward: h_prev)
// and dy and the GRU's candidate ({B, H} each). A step kernel prefetches those its own kind reads.
struct RnnStepPrefetch {
  const float* pre = nullptr;
  const float* state = nullptr;
  const float* dy = nullptr;
  const float* candidate = nullptr;
};

// Clipped ReLU step: h[b, k] = min(max(s, 0), clip) on valid rows, else 0, where s is
// pre[b * ld_pre + k] (+ product[b * ld_product + k] where product is not null): `pre` holds
// W x (+ b), plus U h_prev unless a GEMM wrote that into `product` instead. h_bf16: h rounded, or
// null.
void rnn_relu_step_forward(const float* pre, int ld_pre, const float* product, int ld_product,
                           float* h, uint16_t* h_bf16, int B, int H, int t, const int* lengths,
                           float clip, const RnnStepPrefetch& next, cudaStream_t stream);

// GRU step (gate order r, z, n): with a = pre row (input side, 3H) and g = hidden_gates row
// (U h_prev, 3H, rows rnn_padded_ld(3H) apart) plus bias_h,
//   r = sigmoid(a_r + g_r + b_hr), z = sigmoid(a_z + g_z + b_hz), hn = g_n + b_hn,
//   n = tanh(a_n + r * hn), h = (1 - z) n + z h_prev.
// On valid rows writes r, z, n over `pre` (what backward needs), hn to candidate {B, H} and h;
// on invalid rows only h = 0 (hidden_gates' rows past the GEMM's are read, in bounds, and their
// result discarded). h_bf16: h rounded, or null.
void rnn_gru_step_forward(float* pre, int ld_pre, const float* hidden_gates, const float* bias_h,
                          const float* h_prev, float* h, uint16_t* h_bf16, float* candidate, int B,
                          int H, int t, const int* lengths, const RnnStepPrefetch& next,
                          cudaStream_t stream);

// Clipped ReLU backward step: dpre[b, k] = (0 < h < clip) ? dy + carry : 0 on valid rows, 0 on
// invalid ones, where also next[b, :] = 0 (the recurrent GEMM next = dpre U fills valid rows).
// dpre_bf16: dpre rounded, or null. carry and next: rows rnn_padded_ld(H) apart.
void rnn_relu_step_backward(const float* h, const float* dy, const float* carry, float* dpre,
                            int ld_pre, uint16_t* dpre_bf16, float* next, int B, int H, int t,
                            const int* lengths, float clip, const RnnStepPrefetch& next_step,
                            cudaStream_t stream);

// GRU backward step, with dh = dy + carry and r, z, n read from `gates` (the forward's `pre`):
//   dn = dh (1 - z)(1 - n^2), dz = dh (h_prev - n) z (1 - z), dr = dn hn r (1 - r),
//   dpre = (dr, dz, dn) [input side], dgates = (dr, dz, dn r) [hidden side, ld 3H],
//   next = dh z (the GEMM then adds dgates U); carry and next rows rnn_padded_ld(H) apart.
// Invalid rows: dpre = dgates = next = 0. dgates_bf16: dgates rounded, or null.
void rnn_gru_step_backward(const float* gates, int ld_pre, const float* candidate,
                           const float* h_prev, const float* dy, const float* carry, float* dpre,
                           float* dgates, uint16_t* dgates_bf16, float* next, int B, int H, int t,
                           const int* lengths, const RnnStepPrefetch& next_step,
                           cudaStream_t stream);

// out[c] (+)= sum_r x[r * ld + c] for c < cols, in a fixed order (deterministic): the bias
// gradient of one direction's columns of a wider array. Overwrites `out` unless `accumulate`.
void rnn_column_sum(const float* x, int64_t rows, int cols, int64_t ld, float* out, bool accumulate,
                    cudaStream_t stream);

// y = h0 (+ h1): the directions summed; h1 may be null (unidirectional).
void rnn_sum_directions(const float* h0, const float* h1, float* y, int64_t n, cudaStream_t stream);

}  // namespace ds2::kernels
