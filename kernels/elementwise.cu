#include <cmath>
#include <cstdint>

#include "core/bf16.h"
#include "core/cuda/check.h"
#include "core/dropout_mask.h"
#include "kernels/clipped_relu.cuh"
#include "kernels/elementwise.h"
#include "kernels/grid.h"

namespace ds2::kernels {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  return grid_stride_blocks(n, kThreads);
}

// Grid-stride loops: any n with a bounded grid.
#define DS2_GRID_STRIDE(i, n)                                                            \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void fill_kernel(float* x, int64_t n, float v) {
  DS2_GRID_STRIDE(i, n) x[i] = v;
}
__global__ void scale_kernel(float* x, int64_t n, float a) {
  DS2_GRID_STRIDE(i, n) x[i] *= a;
}
__global__ void add_rows_kernel(float* y, int ld_y, const float* x, int ld_x, int cols, int64_t n) {
  DS2_GRID_STRIDE(i, n) {
    const int64_t r = i / cols;
    const int c = static_cast<int>(i - r * cols);
    y[r * ld_y + c] += x[r * ld_x + c];
  }
}

__global__ void axpy_kernel(float* y, const float* x, int64_t n, float a) {
  DS2_GRID_STRIDE(i, n) y[i] += a * x[i];
}
// A block per row at a time: valid rows (most of them) cost one length lookup, no stores.
__global__ void zero_padding_kernel(float* data, int T, int B, int64_t frame, const int* lengths) {
  const int rows = T * B;
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    const int t = row / B;
    if (t < __ldg(lengths + (row - t * B))) continue;  // the whole block
    float* r = data + row * frame;
    for (int64_t j = threadIdx.x; j < frame; j += blockDim.x) r[j] = 0.0f;
  }
}
__global__ void clipped_relu_kernel(const float* x, float* y, int64_t n, float clip) {
  DS2_GRID_STRIDE(i, n) y[i] = clipped_relu(x[i], clip);
}
__global__ void clipped_relu_backward_kernel(const float* y, const float* dy, float* dx, int64_t n,
                                             float clip) {
  DS2_GRID_STRIDE(i, n) dx[i] = clipped_relu_grad(y[i], dy[i], clip);
}
__global__ void add_row_bias_kernel(float* y, const float* bias, int64_t rows, int cols) {
  DS2_GRID_STRIDE(i, rows * cols) y[i] += bias[i % cols];
}
// One block per column chunk of 32 columns; threads stride over rows, then a fixed-order tree.
__global__ void column_sum_kernel(const float* x, int64_t rows, int cols, float* out,
                                  bool accumulate) {
  __shared__ float partial[8][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  float s = 0.0f;
  if (c < cols)
    for (int64_t r = threadIdx.y; r < rows; r += 8) s += x[r * cols + c];
  partial[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.0f;
    for (int k = 0; k < 8; ++k) total += partial[k][threadIdx.x];
    out[c] = accumulate ? out[c] + total : total;
  }
}
// Pass 1: block k sums the squares of its grid-stride share into partial[k]; pass 2: one block
// adds the partials. Both in a fixed order, so the result never changes between runs.
__global__ void sum_squares_partial_kernel(const float* x, int64_t n, double* partials) {
  __shared__ double cache[256];
  double s = 0.0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    s += static_cast<double>(x[i]) * x[i];
  cache[threadIdx.x] = s;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) cache[threadIdx.x] += cache[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = cache[0];
}
__global__ void sum_partials_kernel(const double* partials, int count, double* out) {
  __shared__ double cache[kSumSquaresPartials];
  cache[threadIdx.x] = threadIdx.x < count ? partials[threadIdx.x] : 0.0;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) cache[threadIdx.x] += cache[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = cache[0];
}

__global__ void dropout_kernel(const float* x, float* y, float* mask, int64_t n, float p,
                               uint64_t seed) {
  DS2_GRID_STRIDE(i, n) {
    const float m = dropout_scale(seed, static_cast<uint64_t>(i), p);
    mask[i] = m;
    y[i] = x[i] * m;
  }
}
__global__ void swap_kernel(float* a, float* b, int64_t n) {
  DS2_GRID_STRIDE(i, n) {
    const float t = a[i];
    a[i] = b[i];
    b[i] = t;
  }
}
__global__ void multiply_kernel(const float* a, const float* b, float* y, int64_t n) {
  DS2_GRID_STRIDE(i, n) y[i] = a[i] * b[i];
}
__global__ void apply_mask_kernel(const float* x, const uint8_t* mask, float* y, int64_t n) {
  DS2_GRID_STRIDE(i, n) y[i] = mask[i] ? x[i] : 0.0f;
}

__global__ void to_bf16_kernel(const float* x, uint16_t* y, int64_t n) {
  DS2_GRID_STRIDE(i, n) y[i] = float_to_bf16(x[i]);
}

// Four at a time (16-byte loads, 8-byte stores): x 16-byte and y 8-byte aligned.
__global__ void to_bf16_x4_kernel(const float4* x, uint2* y, int64_t n4) {
  DS2_GRID_STRIDE(i, n4) {
    const float4 v = __ldg(x + i);
    y[i] = make_uint2(float_to_bf16(v.x) | (uint32_t{float_to_bf16(v.y)} << 16),
                      float_to_bf16(v.z) | (uint32_t{float_to_bf16(v.w)} << 16));
  }
}

__global__ void to_bf16_rows_kernel(const float* x, int cols, uint16_t* y, int ld_y, int64_t n) {
  DS2_GRID_STRIDE(i, n) {
    const int64_t r = i / ld_y;
    const int c = static_cast<int>(i - r * ld_y);
    y[i] = c < cols ? float_to_bf16(x[r * cols + c]) : 0;
  }
}

__global__ void from_bf16_kernel(const uint16_t* x, float* y, int64_t n) {
  DS2_GRID_STRIDE(i, n) y[i] = bf16_to_float(x[i]);
}

}  // namespace

void fill(float* x, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return;
  if (value == 0.0f && !std::signbit(value)) {
    // +0.0f is all zero bytes, and the driver's memset writes them at full bandwidth (the
    // one-float-per-thread kernel reached about a third of it on the 400 MB gradient buffer).
    DS2_CUDA_CHECK(cudaMemsetAsync(x, 0, sizeof(float) * n, stream));
    return;
  }
  fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, n, value);
  DS2_CUDA_CHECK_LAUNCH();
}
void scale(float* x, int64_t n, float alpha, cudaStream_t stream) {
  if (n <= 0) return;
  scale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, n, alpha);
  DS2_CUDA_CHECK_LAUNCH();
}
void axpy(float* y, const float* x, int64_t n, float alpha, cudaStream_t stream) {
  if (n <= 0) return;
  axpy_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, x, n, alpha);
  DS2_CUDA_CHECK_LAUNCH();
}
void add_rows(float* y, int ld_y, const float* x, int ld_x, int64_t rows, int cols,
              cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return;
  add_rows_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, ld_y, x, ld_x, cols, n);
  DS2_CUDA_CHECK_LAUNCH();
}

void zero_padding(float* data, int T, int B, int64_t frame, const int* lengths,
                  cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(T) * B * frame;
  if (n <= 0) return;
  const int rows = T * B;  // T * B < 2^31: the frame lists and lengths are int
  const int blocks = rows < 4096 ? rows : 4096;
  zero_padding_kernel<<<blocks, kThreads, 0, stream>>>(data, T, B, frame, lengths);
  DS2_CUDA_CHECK_LAUNCH();
}
void clipped_relu(const float* x, float* y, int64_t n, float clip, cudaStream_t stream) {
  if (n <= 0) return;
  clipped_relu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n, clip);
  DS2_CUDA_CHECK_LAUNCH();
}
void clipped_relu_backward(const float* y, const float* dy, float* dx, int64_t n, float clip,
                           cudaStream_t stream) {
  if (n <= 0) return;
  clipped_relu_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, dy, dx, n, clip);
  DS2_CUDA_CHECK_LAUNCH();
}
void add_row_bias(float* y, const float* bias, int64_t rows, int cols, cudaStream_t stream) {
  if (rows * cols <= 0) return;
  add_row_bias_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(y, bias, rows, cols);
  DS2_CUDA_CHECK_LAUNCH();
}
void column_sum(const float* x, int64_t rows, int cols, float* out, bool accumulate,
                cudaStream_t stream) {
  if (cols <= 0) return;
  column_sum_kernel<<<(cols + 31) / 32, dim3(32, 8), 0, stream>>>(x, rows, cols, out, accumulate);
  DS2_CUDA_CHECK_LAUNCH();
}
void sum_squares(const float* x, int64_t n, double* scratch, double* out, cudaStream_t stream) {
  sum_squares_partial_kernel<<<kSumSquaresPartials, 256, 0, stream>>>(x, n, scratch);
  DS2_CUDA_CHECK_LAUNCH();
  sum_partials_kernel<<<1, kSumSquaresPartials, 0, stream>>>(scratch, kSumSquaresPartials, out);
  DS2_CUDA_CHECK_LAUNCH();
}
void dropout_forward(const float* x, float* y, float* mask, int64_t n, float p, uint64_t seed,
                     cudaStream_t stream) {
  if (n <= 0) return;
  dropout_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, mask, n, p, seed);
  DS2_CUDA_CHECK_LAUNCH();
}
void swap(float* a, float* b, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  swap_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, n);
  DS2_CUDA_CHECK_LAUNCH();
}
void multiply(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  multiply_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, y, n);
  DS2_CUDA_CHECK_LAUNCH();
}
void apply_mask(const float* x, const uint8_t* mask, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  apply_mask_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, mask, y, n);
  DS2_CUDA_CHECK_LAUNCH();
}

void to_bf16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const bool aligned = aligned_to(x, 16) && aligned_to(y, 8);
  const int64_t n4 = aligned ? n / 4 : 0;
  if (n4 > 0) {
    to_bf16_x4_kernel<<<blocks_for(n4), kThreads, 0, stream>>>(reinterpret_cast<const float4*>(x),
                                                               reinterpret_cast<uint2*>(y), n4);
    DS2_CUDA_CHECK_LAUNCH();
  }
  if (n > 4 * n4) {
    to_bf16_kernel<<<blocks_for(n - 4 * n4), kThreads, 0, stream>>>(x + 4 * n4, y + 4 * n4,
                                                                    n - 4 * n4);
    DS2_CUDA_CHECK_LAUNCH();
  }
}

void to_bf16_rows(const float* x, int64_t rows, int cols, uint16_t* y, int ld_y,
                  cudaStream_t stream) {
  if (ld_y == cols) return to_bf16(x, y, rows * cols, stream);
  const int64_t n = rows * ld_y;
  if (n <= 0) return;
  to_bf16_rows_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, cols, y, ld_y, n);
  DS2_CUDA_CHECK_LAUNCH();
}

void from_bf16(const uint16_t* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  from_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n);
  DS2_CUDA_CHECK_LAUNCH();
}

}  // namespace ds2::kernels
