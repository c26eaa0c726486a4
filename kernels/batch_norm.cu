#include <algorithm>

#include "core/cuda/check.h"
#include "kernels/batch_norm.h"

namespace ds2::kernels {
namespace {

// How the T*B frame rows are cut into chunks for the partial sums. It depends only on the data's
// dimensions, so the summation order (and the result) is the same on every call.
struct ChunkPlan {
  int64_t rows_per_chunk = 1;
  int chunks = 0;
};

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

ChunkPlan plan_chunks(const BatchNormDims& d) {
  const int64_t rows = int64_t{d.T} * d.B;
  ChunkPlan p;
  if (rows == 0) return p;
  if (d.S == 1) {
    // {T, B, F}: 32 channels per block, 8 row lanes; at most 64 chunks keeps the partials small
    // for wide layers (a bidirectional GRU's 6912 projection features).
    p.rows_per_chunk = std::max<int64_t>(64, ceil_div(rows, 64));
  } else {
    // {T, B, C, S}: one block per (channel, chunk) of about 4096 values, at most 256 chunks.
    p.rows_per_chunk = std::max<int64_t>(1, ceil_div(4096, d.S));
    if (ceil_div(rows, p.rows_per_chunk) > 256) p.rows_per_chunk = ceil_div(rows, 256);
  }
  p.chunks = static_cast<int>(ceil_div(rows, p.rows_per_chunk));
  return p;
}

enum Mode { kSum = 0, kSquaredDeviation = 1, kBackward = 2 };

// The per-value terms, in float as the CPU reference computes them, accumulated in double.
template <int kMode>
__device__ __forceinline__ void accumulate(float x, float dy, float mean, float inv_std, double& a,
                                           double& b) {
  if (kMode == kSum) {
    a += x;
  } else if (kMode == kSquaredDeviation) {
    const float d = x - mean;
    a += d * d;
  } else {
    a += dy;
    b += dy * (x - mean) * inv_std;
  }
}

constexpr int kRowLanes = 8;

// S == 1: block (32 channels, 8 row lanes) over one chunk of rows; lane sums combined in lane
// order. Writes partial_a/b[chunk * C + c].
template <int kMode>
__global__ void partials_rows_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                     const int* __restrict__ lengths,
                                     const float* __restrict__ mean,
                                     const float* __restrict__ inv_std, int B, int C, int64_t rows,
                                     int64_t rows_per_chunk, double* partial_a, double* partial_b) {
  __shared__ double sa[kRowLanes][33], sb[kRowLanes][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  const int chunk = blockIdx.y;
  const int64_t r0 = chunk * rows_per_chunk;
  const int64_t r1 = min(rows, r0 + rows_per_chunk);
  double a = 0.0, b = 0.0;
  if (c < C) {
    const float m = kMode != kSum ? mean[c] : 0.0f;
    const float is = kMode == kBackward ? inv_std[c] : 0.0f;
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) {
      const int t = static_cast<int>(r / B), bb = static_cast<int>(r % B);
      if (t >= lengths[bb]) continue;
      const int64_t i = r * C + c;
      accumulate<kMode>(x[i], kMode == kBackward ? dy[i] : 0.0f, m, is, a, b);
    }
  }
  sa[threadIdx.y][threadIdx.x] = a;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    double ta = 0.0, tb = 0.0;
    for (int k = 0; k < kRowLanes; ++k) {
      ta += sa[k][threadIdx.x];
      tb += sb[k][threadIdx.x];
    }
    partial_a[int64_t{chunk} * C + c] = ta;
    if (kMode == kBackward) partial_b[int64_t{chunk} * C + c] = tb;
  }
}

constexpr int kPositionThreads = 256;

// S > 1: block per (channel, chunk of rows); threads stride over the chunk's rows * S values,
// then a fixed shared-memory tree.
template <int kMode>
__global__ void partials_positions_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                          const int* __restrict__ lengths,
                                          const float* __restrict__ mean,
                                          const float* __restrict__ inv_std, int B, int C,
                                          int64_t S, int64_t rows, int64_t rows_per_chunk,
                                          double* partial_a, double* partial_b) {
  __shared__ double sa[kPositionThreads], sb[kPositionThreads];
  const int c = blockIdx.x;
  const int chunk = blockIdx.y;
  const int64_t r0 = chunk * rows_per_chunk;
  const int64_t r1 = min(rows, r0 + rows_per_chunk);
  const int64_t count = (r1 - r0) * S;
  const float m = kMode != kSum ? mean[c] : 0.0f;
  const float is = kMode == kBackward ? inv_std[c] : 0.0f;
  double a = 0.0, b = 0.0;
  for (int64_t e = threadIdx.x; e < count; e += kPositionThreads) {
    const int64_t r = r0 + e / S, s = e % S;
    const int t = static_cast<int>(r / B), bb = static_cast<int>(r % B);
    if (t >= lengths[bb]) continue;
    const int64_t i = (r * C + c) * S + s;
    accumulate<kMode>(x[i], kMode == kBackward ? dy[i] : 0.0f, m, is, a, b);
  }
  sa[threadIdx.x] = a;
  sb[threadIdx.x] = b;
  __syncthreads();
  for (int stride = kPositionThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      sa[threadIdx.x] += sa[threadIdx.x + stride];
      sb[threadIdx.x] += sb[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partial_a[int64_t{chunk} * C + c] = sa[0];
    if (kMode == kBackward) partial_b[int64_t{chunk} * C + c] = sb[0];
  }
}

template <int kMode>
void launch_partials(const BatchNormDims& d, const ChunkPlan& p, const float* x, const float* dy,
                     const int* lengths, const float* mean, const float* inv_std, double* partial_a,
                     double* partial_b, cudaStream_t stream) {
  if (p.chunks == 0) return;
  const int64_t rows = int64_t{d.T} * d.B;
  if (d.S == 1) {
    const dim3 grid((d.C + 31) / 32, p.chunks);
    partials_rows_kernel<kMode><<<grid, dim3(32, kRowLanes), 0, stream>>>(
        x, dy, lengths, mean, inv_std, d.B, d.C, rows, p.rows_per_chunk, partial_a, partial_b);
  } else {
    const dim3 grid(d.C, p.chunks);
    partials_positions_kernel<kMode><<<grid, kPositionThreads, 0, stream>>>(
        x, dy, lengths, mean, inv_std, d.B, d.C, d.S, rows, p.rows_per_chunk, partial_a, partial_b);
  }
  DS2_CUDA_CHECK_LAUNCH();
}

// Per channel: sums the chunks' partials in chunk order.
__device__ __forceinline__ double sum_chunks(const double* partial, int chunks, int C, int c) {
  double s = 0.0;
  for (int k = 0; k < chunks; ++k) s += partial[int64_t{k} * C + c];
  return s;
}

__global__ void finalize_mean_kernel(const double* partial, int chunks, int C, double n,
                                     float* mean) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  mean[c] = static_cast<float>(sum_chunks(partial, chunks, C, c) / n);
}

__global__ void finalize_variance_kernel(const double* partial, int chunks, int C, double n,
                                         const float* gamma, const float* beta, float momentum,
                                         float epsilon, float* running_mean, float* running_var,
                                         BatchNormStats stats) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const double var = sum_chunks(partial, chunks, C, c) / n;
  const float inv_std = static_cast<float>(1.0 / sqrt(var + static_cast<double>(epsilon)));
  const float mean = stats.mean[c];
  stats.inv_std[c] = inv_std;
  const double unbias = n > 1.0 ? n / (n - 1.0) : 1.0;
  running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * mean;
  running_var[c] = (1.0f - momentum) * running_var[c] + momentum * static_cast<float>(var * unbias);
  const float a = gamma[c] * inv_std;
  stats.coef_a[c] = a;
  stats.coef_b[c] = beta[c] - mean * a;
}

__global__ void inference_stats_kernel(int C, const float* gamma, const float* beta,
                                       const float* running_mean, const float* running_var,
                                       float epsilon, BatchNormStats stats) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const float mean = running_mean[c];
  const float inv_std = 1.0f / sqrtf(running_var[c] + epsilon);
  stats.mean[c] = mean;
  stats.inv_std[c] = inv_std;
  const float a = gamma[c] * inv_std;
  stats.coef_a[c] = a;
  stats.coef_b[c] = beta[c] - mean * a;
}

__global__ void finalize_backward_kernel(const double* partial_a, const double* partial_b,
                                         int chunks, int C, double n, bool batch_stats,
                                         const float* gamma, float* dgamma, float* dbeta,
                                         bool input_grad, BatchNormStats stats) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const double sum_dy = sum_chunks(partial_a, chunks, C, c);
  const double sum_dy_xhat = sum_chunks(partial_b, chunks, C, c);
  dgamma[c] += static_cast<float>(sum_dy_xhat);
  dbeta[c] += static_cast<float>(sum_dy);
  if (!input_grad) return;
  const float inv_std = stats.inv_std[c];
  const double a = static_cast<double>(gamma[c]) * inv_std;
  stats.coef_a[c] = static_cast<float>(a);
  if (batch_stats && n > 0.0) {
    const double k = a * inv_std * sum_dy_xhat / n;
    stats.coef_b[c] = static_cast<float>(-k);
    stats.coef_c[c] = static_cast<float>(k * stats.mean[c] - a * sum_dy / n);
  } else {
    stats.coef_b[c] = 0.0f;
    stats.coef_c[c] = 0.0f;
  }
}

// Rows (frames) over grid.y, the frame's C*S values over grid.x; padding rows get zeros.
constexpr int kApplyThreads = 256;

dim3 apply_grid(const BatchNormDims& d) {
  const int64_t rows = int64_t{d.T} * d.B, frame = d.C * d.S;
  return dim3(static_cast<unsigned>(std::min<int64_t>(ceil_div(frame, kApplyThreads), 32)),
              static_cast<unsigned>(std::min<int64_t>(rows, 8192)));
}

__global__ void apply_kernel(const float* __restrict__ x, float* __restrict__ y,
                             const int* __restrict__ lengths, const float* __restrict__ a,
                             const float* __restrict__ b, int B, int64_t rows, int64_t frame,
                             int64_t S) {
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const int t = static_cast<int>(row / B), bb = static_cast<int>(row % B);
    const bool valid = t < lengths[bb];
    const int64_t base = row * frame;
    for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < frame;
         j += int64_t{gridDim.x} * blockDim.x) {
      const int64_t c = S == 1 ? j : j / S;
      y[base + j] = valid ? x[base + j] * a[c] + b[c] : 0.0f;
    }
  }
}

__global__ void backward_apply_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                      float* __restrict__ dx, const int* __restrict__ lengths,
                                      const float* __restrict__ ca, const float* __restrict__ cb,
                                      const float* __restrict__ cc, int B, int64_t rows,
                                      int64_t frame, int64_t S) {
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const int t = static_cast<int>(row / B), bb = static_cast<int>(row % B);
    const bool valid = t < lengths[bb];
    const int64_t base = row * frame;
    for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < frame;
         j += int64_t{gridDim.x} * blockDim.x) {
      const int64_t c = S == 1 ? j : j / S;
      dx[base + j] = valid ? dy[base + j] * ca[c] + x[base + j] * cb[c] + cc[c] : 0.0f;
    }
  }
}

constexpr int kChannelThreads = 128;

int channel_blocks(int C) {
  return (C + kChannelThreads - 1) / kChannelThreads;
}

}  // namespace

int64_t batch_norm_workspace(const BatchNormDims& dims) {
  return std::max<int64_t>(1, 2 * int64_t{plan_chunks(dims).chunks} * dims.C);
}

void batch_norm_train_stats(const BatchNormDims& dims, const float* x, const int* lengths,
                            int64_t valid_count, const float* gamma, const float* beta,
                            float momentum, float epsilon, float* running_mean, float* running_var,
                            const BatchNormStats& stats, double* workspace, cudaStream_t stream) {
  DS2_CHECK(valid_count > 0, "batch_norm_train_stats: no valid values");
  const ChunkPlan p = plan_chunks(dims);
  const double n = static_cast<double>(valid_count);
  launch_partials<kSum>(dims, p, x, nullptr, lengths, nullptr, nullptr, workspace, nullptr, stream);
  finalize_mean_kernel<<<channel_blocks(dims.C), kChannelThreads, 0, stream>>>(
      workspace, p.chunks, dims.C, n, stats.mean);
  DS2_CUDA_CHECK_LAUNCH();
  launch_partials<kSquaredDeviation>(dims, p, x, nullptr, lengths, stats.mean, nullptr, workspace,
                                     nullptr, stream);
  finalize_variance_kernel<<<channel_blocks(dims.C), kChannelThreads, 0, stream>>>(
      workspace, p.chunks, dims.C, n, gamma, beta, momentum, epsilon, running_mean, running_var,
      stats);
  DS2_CUDA_CHECK_LAUNCH();
}

void batch_norm_inference_stats(int C, const float* gamma, const float* beta,
                                const float* running_mean, const float* running_var, float epsilon,
                                const BatchNormStats& stats, cudaStream_t stream) {
  inference_stats_kernel<<<channel_blocks(C), kChannelThreads, 0, stream>>>(
      C, gamma, beta, running_mean, running_var, epsilon, stats);
  DS2_CUDA_CHECK_LAUNCH();
}

void batch_norm_apply(const BatchNormDims& dims, const float* x, float* y, const int* lengths,
                      const float* a, const float* b, cudaStream_t stream) {
  const int64_t rows = int64_t{dims.T} * dims.B, frame = dims.C * dims.S;
  if (rows * frame == 0) return;
  apply_kernel<<<apply_grid(dims), kApplyThreads, 0, stream>>>(x, y, lengths, a, b, dims.B, rows,
                                                               frame, dims.S);
  DS2_CUDA_CHECK_LAUNCH();
}

void batch_norm_backward_stats(const BatchNormDims& dims, const float* x, const float* dy,
                               const int* lengths, int64_t valid_count, bool batch_stats,
                               const float* gamma, float* dgamma, float* dbeta, bool input_grad,
                               const BatchNormStats& stats, double* workspace,
                               cudaStream_t stream) {
  const ChunkPlan p = plan_chunks(dims);
  double* partial_a = workspace;
  double* partial_b = workspace + int64_t{p.chunks} * dims.C;
  launch_partials<kBackward>(dims, p, x, dy, lengths, stats.mean, stats.inv_std, partial_a,
                             partial_b, stream);
  finalize_backward_kernel<<<channel_blocks(dims.C), kChannelThreads, 0, stream>>>(
      partial_a, partial_b, p.chunks, dims.C, static_cast<double>(valid_count), batch_stats, gamma,
      dgamma, dbeta, input_grad, stats);
  DS2_CUDA_CHECK_LAUNCH();
}

void batch_norm_backward_apply(const BatchNormDims& dims, const float* x, const float* dy,
                               float* dx, const int* lengths, const BatchNormStats& stats,
                               cudaStream_t stream) {
  const int64_t rows = int64_t{dims.T} * dims.B, frame = dims.C * dims.S;
  if (rows * frame == 0) return;
  backward_apply_kernel<<<apply_grid(dims), kApplyThreads, 0, stream>>>(
      x, dy, dx, lengths, stats.coef_a, stats.coef_b, stats.coef_c, dims.B, rows, frame, dims.S);
  DS2_CUDA_CHECK_LAUNCH();
}

}  // namespace ds2::kernels
