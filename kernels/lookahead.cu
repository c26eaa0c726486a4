#include <cstdint>

#include "core/cuda/check.h"
#include "kernels/lookahead.h"

namespace ds2::kernels {
namespace {

constexpr int kThreads = 256;

// One thread per output element (t, b, f).
__global__ void forward_kernel(const float* __restrict__ x, const float* __restrict__ w,
                               const int* __restrict__ lengths, int T, int B, int F, int context,
                               float* __restrict__ y) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= int64_t{T} * B * F) return;
  const int f = static_cast<int>(i % F);
  const int64_t tb = i / F;
  const int b = static_cast<int>(tb % B), t = static_cast<int>(tb / B);
  const int len = lengths[b];
  float sum = 0.0f;
  for (int j = 0; j <= context && t + j < len; ++j)  // no term at all for a padding frame
    sum += w[int64_t{j} * F + f] * x[(int64_t{t + j} * B + b) * F + f];
  y[i] = sum;
}

__global__ void backward_data_kernel(const float* __restrict__ dy, const float* __restrict__ w,
                                     const int* __restrict__ lengths, int T, int B, int F,
                                     int context, float* __restrict__ dx) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= int64_t{T} * B * F) return;
  const int f = static_cast<int>(i % F);
  const int64_t sb = i / F;
  const int b = static_cast<int>(sb % B), s = static_cast<int>(sb / B);
  float sum = 0.0f;
  if (s < lengths[b])
    for (int j = 0; j <= context && j <= s; ++j)
      sum += w[int64_t{j} * F + f] * dy[(int64_t{s - j} * B + b) * F + f];
  dx[i] = sum;
}

// Block (j, feature tile of 32): 32 x 8 threads; thread (fx, ry) sums rows ry, ry + 8, ... of
// feature f for tap j, then the 8 partial sums are added in a fixed order.
__global__ void backward_weights_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                        const int* __restrict__ lengths, int T, int B, int F,
                                        float* __restrict__ dw) {
  __shared__ float partial[8][33];
  const int j = blockIdx.y;
  const int f = blockIdx.x * 32 + threadIdx.x;
  float sum = 0.0f;
  if (f < F)
    for (int64_t row = threadIdx.y; row < int64_t{T} * B; row += 8) {
      const int b = static_cast<int>(row % B), t = static_cast<int>(row / B);
      if (t + j < lengths[b]) sum += dy[row * F + f] * x[(row + int64_t{j} * B) * F + f];
    }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && f < F) {
    float total = 0.0f;
    for (int r = 0; r < 8; ++r) total += partial[r][threadIdx.x];
    dw[int64_t{j} * F + f] += total;
  }
}

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>((n + kThreads - 1) / kThreads);
}

}  // namespace

void lookahead_forward(const float* x, const float* w, const int* lengths, int T, int B, int F,
                       int context, float* y, cudaStream_t stream) {
  const int64_t n = int64_t{T} * B * F;
  if (n == 0) return;
  forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, w, lengths, T, B, F, context, y);
  DS2_CUDA_CHECK(cudaGetLastError());
}

void lookahead_backward_data(const float* dy, const float* w, const int* lengths, int T, int B,
                             int F, int context, float* dx, cudaStream_t stream) {
  const int64_t n = int64_t{T} * B * F;
  if (n == 0) return;
  backward_data_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dy, w, lengths, T, B, F, context,
                                                               dx);
  DS2_CUDA_CHECK(cudaGetLastError());
}

void lookahead_backward_weights(const float* x, const float* dy, const int* lengths, int T, int B,
                                int F, int context, float* dw, cudaStream_t stream) {
  if (F == 0) return;
  const dim3 grid(static_cast<unsigned>((F + 31) / 32), static_cast<unsigned>(context + 1));
  backward_weights_kernel<<<grid, dim3(32, 8), 0, stream>>>(x, dy, lengths, T, B, F, dw);
  DS2_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ds2::kernels
