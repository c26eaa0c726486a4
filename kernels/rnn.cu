#include <algorithm>

#include "core/bf16.h"
#include "core/cuda/check.h"
#include "kernels/clipped_relu.cuh"
#include "kernels/grid.h"
#include "kernels/gru_cell.cuh"
#include "kernels/rnn.h"

namespace ds2::kernels {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  return grid_stride_blocks(n, kThreads);
}

// The step kernels' grid: kStepThreads columns a block along x, a batch row along y (rows past the
// grid's y limit looped over), so that no thread divides by H; 128-thread blocks fill the SMs at
// the batches the GEMM recurrence runs. Inside, b and k name the row and column of a valid (b, k).
constexpr int kStepThreads = 128;

dim3 step_grid(int B, int H) {
  return dim3(static_cast<unsigned>(ceil_div(H, kStepThreads)), std::min(B, 65535));
}

#define DS2_RNN_STEP_ELEMENTS(b, k, B, H)                \
  const int k = blockIdx.x * kStepThreads + threadIdx.x; \
  if (k < (H))                                           \
    for (int b = blockIdx.y; b < (B); b += gridDim.y)

__device__ __forceinline__ void prefetch_to_l2(const float* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// Column k of a GRU row's three gates (H apart), as the step kernels read them.
__device__ __forceinline__ void prefetch_gates_to_l2(const float* row, int k, int H) {
  for (int gate = 0; gate < 3; ++gate) prefetch_to_l2(row + gate * H + k);
}

#define DS2_RNN_GRID_STRIDE(i, n)                                                        \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// Zeros row b's padding columns [cols, ld) of a padded array (kernels/rnn.h), spread over the
// row's `threads` threads k = 0, 1, ... (a loop: the padding may be wider than the thread count,
// when H < 8, and a GRU's gate rows are 3H wide with H threads).
template <class T>
__device__ void zero_padding_of_row(T* x, int64_t b, int k, int threads, int cols, int ld) {
  for (int j = cols + k; j < ld; j += threads) x[b * ld + j] = T{0};
}

__global__ void add_input_bias_kernel(float* pre, int64_t rows, int cols, int directions,
                                      const float* __restrict__ bias0,
                                      const float* __restrict__ bias1) {
  const int64_t width = int64_t{cols} * directions;
  DS2_RNN_GRID_STRIDE(i, rows * width) {
    const int c = static_cast<int>(i % width);
    pre[i] += c < cols ? bias0[c] : bias1[c - cols];
  }
}

__global__ void relu_step_forward_kernel(const float* __restrict__ pre, int ld_pre,
                                         const float* __restrict__ product, int ld_product,
                                         float* __restrict__ h, uint16_t* __restrict__ h_bf16,
                                         int ld16, int B, int H, int t,
                                         const int* __restrict__ lengths, float clip,
                                         RnnStepPrefetch next) {
  DS2_RNN_STEP_ELEMENTS(b, k, B, H) {
    if (next.pre) prefetch_to_l2(next.pre + int64_t{b} * ld_pre + k);
    // Loaded whatever the row's length (in bounds either way), so that the loads do not wait
    // for lengths[b]'s; an invalid row's sum is discarded.
    float sum = pre[int64_t{b} * ld_pre + k];
    if (product) sum += product[int64_t{b} * ld_product + k];
    const float v = t < lengths[b] ? clipped_relu(sum, clip) : 0.0f;
    h[int64_t{b} * H + k] = v;
    if (h_bf16) {
      h_bf16[int64_t{b} * ld16 + k] = float_to_bf16(v);
      zero_padding_of_row(h_bf16, b, k, H, H, ld16);
    }
  }
}

__global__ void gru_step_forward_kernel(float* __restrict__ pre, int ld_pre,
                                        const float* __restrict__ hidden_gates,
                                        const float* __restrict__ bias_h,
                                        const float* __restrict__ h_prev, float* __restrict__ h,
                                        uint16_t* __restrict__ h_bf16, int ld16, int ld_gates,
                                        float* __restrict__ candidate, int B, int H, int t,
                                        const int* __restrict__ lengths, RnnStepPrefetch next) {
  DS2_RNN_STEP_ELEMENTS(b, k, B, H) {
    if (next.pre) prefetch_gates_to_l2(next.pre + int64_t{b} * ld_pre, k, H);
    const int64_t i = int64_t{b} * H + k;
    // The cell runs whatever the row's length (its loads in bounds either way), so that the loads
    // do not wait for lengths[b]'s; an invalid row's result is discarded.
    float* p = pre + int64_t{b} * ld_pre;
    const float* g = hidden_gates + int64_t{b} * ld_gates;
    // Sums in the CPU reference's order: (a + g) + b_h.
    const GruGates c =
        gru_cell_forward({p[k], p[H + k], p[2 * H + k]}, {g[k], g[H + k], g[2 * H + k]},
                         {bias_h[k], bias_h[H + k], bias_h[2 * H + k]}, h_prev[i]);
    // After the cell's loads, which the stores ahead of them held back: the bf16 walk 0.03-0.3 us
    // a step faster in 29 of 30 shapes (session 75, `bash scripts/dev/step-prefetch.sh gru`, H 1904
    // batch 12 8.39 -> 8.23-8.34).
    if (h_bf16) zero_padding_of_row(h_bf16, b, k, H, H, ld16);
    if (t >= lengths[b]) {
      h[i] = 0.0f;
      if (h_bf16) h_bf16[int64_t{b} * ld16 + k] = 0;
      continue;
    }
    p[k] = c.r;
    p[H + k] = c.z;
    p[2 * H + k] = c.n;
    candidate[i] = c.hn;
    h[i] = c.h;
    if (h_bf16) h_bf16[int64_t{b} * ld16 + k] = float_to_bf16(c.h);
  }
}

__global__ void relu_step_backward_kernel(const float* __restrict__ h, const float* __restrict__ dy,
                                          const float* __restrict__ carry, float* __restrict__ dpre,
                                          int ld_pre, uint16_t* __restrict__ dpre_bf16,
                                          float* __restrict__ next, int ld, int B, int H, int t,
                                          const int* __restrict__ lengths, float clip,
                                          RnnStepPrefetch next_step) {
  DS2_RNN_STEP_ELEMENTS(b, k, B, H) {
    const int64_t i = int64_t{b} * H + k;
    if (next_step.state) prefetch_to_l2(next_step.state + i);
    if (next_step.dy) prefetch_to_l2(next_step.dy + i);
    float* dp = dpre + int64_t{b} * ld_pre + k;
    // Loaded whatever the row's length, as in the forward.
    const float grad = clipped_relu_grad(h[i], dy[i] + carry[int64_t{b} * ld + k], clip);
    float v = 0.0f;
    if (t >= lengths[b])
      next[int64_t{b} * ld + k] = 0.0f;
    else
      v = grad;
    zero_padding_of_row(next, b, k, H, H, ld);
    *dp = v;
    if (dpre_bf16) {
      dpre_bf16[int64_t{b} * ld + k] = float_to_bf16(v);
      zero_padding_of_row(dpre_bf16, b, k, H, H, ld);
    }
  }
}

__global__ void gru_step_backward_kernel(
    const float* __restrict__ gates, int ld_pre, const float* __restrict__ candidate,
    const float* __restrict__ h_prev, const float* __restrict__ dy, const float* __restrict__ carry,
    float* __restrict__ dpre, float* __restrict__ dgates, uint16_t* __restrict__ dgates_bf16,
    int ld_gates, float* __restrict__ next, int ld, int B, int H, int t,
    const int* __restrict__ lengths, RnnStepPrefetch next_step) {
  DS2_RNN_STEP_ELEMENTS(b, k, B, H) {
    const int64_t i = int64_t{b} * H + k;
    if (next_step.pre) prefetch_gates_to_l2(next_step.pre + int64_t{b} * ld_pre, k, H);
    if (next_step.candidate) prefetch_to_l2(next_step.candidate + i);
    if (next_step.state) prefetch_to_l2(next_step.state + i);
    if (next_step.dy) prefetch_to_l2(next_step.dy + i);
    float* dp = dpre + int64_t{b} * ld_pre;
    float* dg = dgates + int64_t{b} * 3 * H;
    // The cell's gradients whatever the row's length, as in the forward.
    const float* p = gates + int64_t{b} * ld_pre;
    const GruGrads c = gru_cell_backward(dy[i] + carry[int64_t{b} * ld + k], p[k], p[H + k],
                                         p[2 * H + k], candidate[i], h_prev[i]);
    if (t >= lengths[b]) {
      dp[k] = dp[H + k] = dp[2 * H + k] = 0.0f;
      dg[k] = dg[H + k] = dg[2 * H + k] = 0.0f;
      next[int64_t{b} * ld + k] = 0.0f;
    } else {
      store_gate_grads(c, dp + k, dg + k, H);
      next[int64_t{b} * ld + k] = c.dh_prev;
    }
    zero_padding_of_row(next, b, k, H, H, ld);
    if (dgates_bf16) {
      uint16_t* dg16 = dgates_bf16 + int64_t{b} * ld_gates + k;
      for (int g = 0; g < 3; ++g) dg16[g * H] = float_to_bf16(dg[g * H + k]);
      zero_padding_of_row(dgates_bf16, b, k, H, 3 * H, ld_gates);
    }
  }
}

// One block per 32 columns, 32 row lanes each summing a fixed stride of rows, then the lanes in
// order.
constexpr int kSumLanes = 32;

__global__ void column_sum_kernel(const float* __restrict__ x, int64_t rows, int cols, int64_t ld,
                                  float* out, bool accumulate) {
  __shared__ float partial[kSumLanes][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  float s = 0.0f;
  if (c < cols)
    for (int64_t r = threadIdx.y; r < rows; r += kSumLanes) s += x[r * ld + c];
  partial[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.0f;
    for (int k = 0; k < kSumLanes; ++k) total += partial[k][threadIdx.x];
    out[c] = accumulate ? out[c] + total : total;
  }
}

__global__ void sum_directions_kernel(const float* __restrict__ h0, const float* __restrict__ h1,
                                      float* __restrict__ y, int64_t n) {
  DS2_RNN_GRID_STRIDE(i, n) y[i] = h1 ? h0[i] + h1[i] : h0[i];
}

}  // namespace

void rnn_add_input_bias(float* pre, int64_t rows, int cols, const float* bias0, const float* bias1,
                        cudaStream_t stream) {
  const int directions = bias1 ? 2 : 1;
  const int64_t n = rows * cols * directions;
  if (n <= 0) return;
  add_input_bias_kernel<<<blocks_for(n), kThreads, 0, stream>>>(pre, rows, cols, directions, bias0,
                                                                bias1);
  DS2_CUDA_CHECK_LAUNCH();
}

void rnn_relu_step_forward(const float* pre, int ld_pre, const float* product, int ld_product,
                           float* h, uint16_t* h_bf16, int B, int H, int t, const int* lengths,
                           float clip, const RnnStepPrefetch& next, cudaStream_t stream) {
  if (B <= 0 || H <= 0) return;
  relu_step_forward_kernel<<<step_grid(B, H), kStepThreads, 0, stream>>>(
      pre, ld_pre, product, ld_product, h, h_bf16, rnn_padded_ld(H), B, H, t, lengths, clip, next);
  DS2_CUDA_CHECK_LAUNCH();
}

void rnn_gru_step_forward(float* pre, int ld_pre, const float* hidden_gates, const float* bias_h,
                          const float* h_prev, float* h, uint16_t* h_bf16, float* candidate, int B,
                          int H, int t, const int* lengths, const RnnStepPrefetch& next,
                          cudaStream_t stream) {
  if (B <= 0 || H <= 0) return;
  gru_step_forward_kernel<<<step_grid(B, H), kStepThreads, 0, stream>>>(
      pre, ld_pre, hidden_gates, bias_h, h_prev, h, h_bf16, rnn_padded_ld(H), rnn_padded_ld(3 * H),
      candidate, B, H, t, lengths, next);
  DS2_CUDA_CHECK_LAUNCH();
}

void rnn_relu_step_backward(const float* h, const float* dy, const float* carry, float* dpre,
                            int ld_pre, uint16_t* dpre_bf16, float* next, int B, int H, int t,
                            const int* lengths, float clip, const RnnStepPrefetch& next_step,
                            cudaStream_t stream) {
  if (B <= 0 || H <= 0) return;
  relu_step_backward_kernel<<<step_grid(B, H), kStepThreads, 0, stream>>>(
      h, dy, carry, dpre, ld_pre, dpre_bf16, next, rnn_padded_ld(H), B, H, t, lengths, clip,
      next_step);
  DS2_CUDA_CHECK_LAUNCH();
}

void rnn_gru_step_backward(const float* gates, int ld_pre, const float* candidate,
                           const float* h_prev, const float* dy, const float* carry, float* dpre,
                           float* dgates, uint16_t* dgates_bf16, float* next, int B, int H, int t,
                           const int* lengths, const RnnStepPrefetch& next_step,
                           cudaStream_t stream) {
  if (B <= 0 || H <= 0) return;
  gru_step_backward_kernel<<<step_grid(B, H), kStepThreads, 0, stream>>>(
      gates, ld_pre, candidate, h_prev, dy, carry, dpre, dgates, dgates_bf16, rnn_padded_ld(3 * H),
      next, rnn_padded_ld(H), B, H, t, lengths, next_step);
  DS2_CUDA_CHECK_LAUNCH();
}

void rnn_column_sum(const float* x, int64_t rows, int cols, int64_t ld, float* out, bool accumulate,
                    cudaStream_t stream) {
  if (cols <= 0) return;
  column_sum_kernel<<<(cols + 31) / 32, dim3(32, kSumLanes), 0, stream>>>(x, rows, cols, ld, out,
                                                                          accumulate);
  DS2_CUDA_CHECK_LAUNCH();
}

void rnn_sum_directions(const float* h0, const float* h1, float* y, int64_t n,
                        cudaStream_t stream) {
  if (n <= 0) return;
  sum_directions_kernel<<<blocks_for(n), kThreads, 0, stream>>>(h0, h1, y, n);
  DS2_CUDA_CHECK_LAUNCH();
}

}  // namespace ds2::kernels
