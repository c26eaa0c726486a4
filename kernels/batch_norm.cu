#include <algorithm>

#include "core/cuda/check.h"
#include "kernels/batch_norm.h"
#include "kernels/grid.h"

namespace ds2::kernels {
namespace {

// How the T*B frame rows are cut into chunks for the partial sums. It depends only on the data's
// dimensions, so the summation order (and the result) is the same on every call.
struct ChunkPlan {
  int64_t rows_per_chunk = 1;
  int chunks = 0;
};

// The kernels index in 32 bits.
void check_indexing(const BatchNormDims& d) {
  const int64_t values = int64_t{d.T} * d.B * d.C * d.S;
  DS2_CHECK(values < (int64_t{1} << 31) - 4096,
            "batch_norm: " << values << " values exceed 32-bit indexing");
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

enum Mode { kMoments, kBackward };

// The per-value terms, accumulated in double. Forward: x and x^2 (exact in double) in one pass;
// the variance is E[x^2] - E[x]^2 in double, which for float data agrees with the CPU's two-pass
// float deviations to float precision. Backward: the CPU reference's float terms.
template <int kMode>
__device__ __forceinline__ void accumulate(float x, float dy, float mean, float inv_std, double& a,
                                           double& b) {
  if (kMode == kMoments) {
    const double xd = x;
    a += xd;
    b += xd * xd;
  } else {
    a += dy;
    b += dy * (x - mean) * inv_std;
  }
}

constexpr int kRowLanes = 8;

// Row-lane blocks (32 channels x kRowLanes lanes): each lane's sums, then the lanes' totals for
// this thread's channel, added in lane order. Call from every thread; the totals are valid in
// lane 0.
__device__ __forceinline__ void sum_row_lanes(double (&sa)[kRowLanes][33],
                                              double (&sb)[kRowLanes][33], double a, double b,
                                              double& total_a, double& total_b) {
  sa[threadIdx.y][threadIdx.x] = a;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  total_a = 0.0, total_b = 0.0;
  if (threadIdx.y != 0) return;
  for (int k = 0; k < kRowLanes; ++k) {
    total_a += sa[k][threadIdx.x];
    total_b += sb[k][threadIdx.x];
  }
}

// S == 1: block (32 channels, 8 row lanes) over one chunk of rows; lane sums combined in lane
// order. Writes partial_a/b[chunk * C + c].
// Index arithmetic is 32-bit (rows * C and T * B below 2^31, checked on the host); the loads of
// a lane's next kUnroll rows are issued before any of them is added, in the same order as one at
// a time.
constexpr int kUnroll = 8;

template <int kMode>
__global__ void partials_rows_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                     const int* __restrict__ lengths,
                                     const float* __restrict__ mean,
                                     const float* __restrict__ inv_std, int B, int C, int rows,
                                     int rows_per_chunk, double* partial_a, double* partial_b) {
  __shared__ double sa[kRowLanes][33], sb[kRowLanes][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  const int chunk = blockIdx.y;
  const int r0 = chunk * rows_per_chunk;
  const int r1 = min(rows, r0 + rows_per_chunk);
  double a = 0.0, b = 0.0;
  if (c < C) {
    const float m = kMode == kBackward ? mean[c] : 0.0f;
    const float is = kMode == kBackward ? inv_std[c] : 0.0f;
    for (int rb = r0 + threadIdx.y; rb < r1; rb += kRowLanes * kUnroll) {
      float xv[kUnroll], dv[kUnroll];
      bool ok[kUnroll];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        const int r = rb + k * kRowLanes;
        const int t = r / B;
        // The value loads do not wait for the length: padding values are loaded, not added.
        const bool in_chunk = r < r1;
        ok[k] = in_chunk && t < __ldg(lengths + (r - t * B));
        const int i = r * C + c;
        xv[k] = in_chunk ? __ldg(x + i) : 0.0f;
        dv[k] = in_chunk && kMode == kBackward ? __ldg(dy + i) : 0.0f;
      }
#pragma unroll
      for (int k = 0; k < kUnroll; ++k)
        if (ok[k]) accumulate<kMode>(xv[k], dv[k], m, is, a, b);
    }
  }
  double ta, tb;
  sum_row_lanes(sa, sb, a, b, ta, tb);
  if (threadIdx.y == 0 && c < C) {
    partial_a[int64_t{chunk} * C + c] = ta;
    partial_b[int64_t{chunk} * C + c] = tb;
  }
}

constexpr int kPositionThreads = 256;

// Position blocks (kPositionThreads threads): every thread's sums, reduced by a fixed
// shared-memory tree into sa[0] and sb[0]. Call from every thread.
__device__ __forceinline__ void sum_positions(double* sa, double* sb, double a, double b) {
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
}

// S > 1: block per (channel, chunk of rows); threads stride over the chunk's rows * S values,
// then a fixed shared-memory tree.
template <int kMode>
__global__ void partials_positions_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                          const int* __restrict__ lengths,
                                          const float* __restrict__ mean,
                                          const float* __restrict__ inv_std, int B, int C, int S,
                                          int rows, int rows_per_chunk, double* partial_a,
                                          double* partial_b) {
  __shared__ double sa[kPositionThreads], sb[kPositionThreads];
  const int c = blockIdx.x;
  const int chunk = blockIdx.y;
  const int r0 = chunk * rows_per_chunk;
  const int r1 = min(rows, r0 + rows_per_chunk);
  const int count = (r1 - r0) * S;
  const float m = kMode == kBackward ? mean[c] : 0.0f;
  const float is = kMode == kBackward ? inv_std[c] : 0.0f;
  double a = 0.0, b = 0.0;
  for (int eb = threadIdx.x; eb < count; eb += kPositionThreads * kUnroll) {
    float xv[kUnroll], dv[kUnroll];
    bool ok[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const int e = eb + k * kPositionThreads;
      const int re = e / S;
      const int r = r0 + re, s = e - re * S;
      const int t = r / B;
      const bool in_chunk = e < count;
      ok[k] = in_chunk && t < __ldg(lengths + (r - t * B));
      const int i = (r * C + c) * S + s;
      xv[k] = in_chunk ? __ldg(x + i) : 0.0f;
      dv[k] = in_chunk && kMode == kBackward ? __ldg(dy + i) : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k)
      if (ok[k]) accumulate<kMode>(xv[k], dv[k], m, is, a, b);
  }
  sum_positions(sa, sb, a, b);
  if (threadIdx.x == 0) {
    partial_a[int64_t{chunk} * C + c] = sa[0];
    partial_b[int64_t{chunk} * C + c] = sb[0];
  }
}

template <int kMode>
void launch_partials(const BatchNormDims& d, const ChunkPlan& p, const float* x, const float* dy,
                     const int* lengths, const float* mean, const float* inv_std, double* partial_a,
                     double* partial_b, cudaStream_t stream) {
  if (p.chunks == 0) return;
  check_indexing(d);
  const int rows = d.T * d.B;
  const int rows_per_chunk = static_cast<int>(p.rows_per_chunk);
  if (d.S == 1) {
    const dim3 grid((d.C + 31) / 32, p.chunks);
    partials_rows_kernel<kMode><<<grid, dim3(32, kRowLanes), 0, stream>>>(
        x, dy, lengths, mean, inv_std, d.B, d.C, rows, rows_per_chunk, partial_a, partial_b);
  } else {
    const dim3 grid(d.C, p.chunks);
    partials_positions_kernel<kMode><<<grid, kPositionThreads, 0, stream>>>(
        x, dy, lengths, mean, inv_std, d.B, d.C, static_cast<int>(d.S), rows, rows_per_chunk,
        partial_a, partial_b);
  }
  DS2_CUDA_CHECK_LAUNCH();
}

// Per channel: sums the chunks' partials in chunk order.
__device__ __forceinline__ double sum_chunks(const double* partial, int chunks, int C, int c) {
  double s = 0.0;
  for (int k = 0; k < chunks; ++k) s += partial[int64_t{k} * C + c];
  return s;
}

// Mean and biased variance from the sums of x and x^2 over n > 0 values, in double. Rounding can
// take E[x^2] - E[x]^2 a hair below 0 for a constant channel.
__device__ __forceinline__ void moments(double sum, double squares, double n, double& mean,
                                        double& var) {
  mean = sum / n;
  var = fmax(0.0, squares / n - mean * mean);
}

// Statistics entry i (a channel, or an utterance's channel) of channel c: the statistics and the
// forward coefficients a = gamma * inv_std, b = beta - mean * a.
__device__ __forceinline__ void forward_coefficients(int64_t i, int c, float mean, float inv_std,
                                                     const float* gamma, const float* beta,
                                                     const BatchNormStats& stats) {
  stats.mean[i] = mean;
  stats.inv_std[i] = inv_std;
  const float a = gamma[c] * inv_std;
  stats.coef_a[i] = a;
  stats.coef_b[i] = beta[c] - mean * a;
}

__global__ void finalize_stats_kernel(const double* partial_sum, const double* partial_squares,
                                      int chunks, int C, double n, const float* gamma,
                                      const float* beta, float momentum, float epsilon,
                                      float* running_mean, float* running_var,
                                      BatchNormStats stats) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  double mean_d, var;
  moments(sum_chunks(partial_sum, chunks, C, c), sum_chunks(partial_squares, chunks, C, c), n,
          mean_d, var);
  const float inv_std = static_cast<float>(1.0 / sqrt(var + static_cast<double>(epsilon)));
  const float mean = static_cast<float>(mean_d);
  const double unbias = n > 1.0 ? n / (n - 1.0) : 1.0;
  running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * mean;
  running_var[c] = (1.0f - momentum) * running_var[c] + momentum * static_cast<float>(var * unbias);
  forward_coefficients(c, c, mean, inv_std, gamma, beta, stats);
}

__global__ void inference_stats_kernel(int C, const float* gamma, const float* beta,
                                       const float* running_mean, const float* running_var,
                                       float epsilon, BatchNormStats stats) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  forward_coefficients(c, c, running_mean[c], 1.0f / sqrtf(running_var[c] + epsilon), gamma, beta,
                       stats);
}

// The dx coefficients of statistics entry i (a channel, or an utterance's channel). With the
// data's own statistics over n values: dx = gamma * inv_std * (dy - sum(dy) / n - xhat *
// sum(dy * xhat) / n); otherwise (running statistics, constants) dx = gamma * inv_std * dy.
__device__ __forceinline__ void backward_coefficients(int64_t i, float gamma, bool data_stats,
                                                      double n, double sum_dy, double sum_dy_xhat,
                                                      const BatchNormStats& stats) {
  const float inv_std = stats.inv_std[i];
  const double a = static_cast<double>(gamma) * inv_std;
  stats.coef_a[i] = static_cast<float>(a);
  if (data_stats && n > 0.0) {
    const double k = a * inv_std * sum_dy_xhat / n;
    stats.coef_b[i] = static_cast<float>(-k);
    stats.coef_c[i] = static_cast<float>(k * stats.mean[i] - a * sum_dy / n);
  } else {
    stats.coef_b[i] = 0.0f;
    stats.coef_c[i] = 0.0f;
  }
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
  if (input_grad) backward_coefficients(c, gamma[c], batch_stats, n, sum_dy, sum_dy_xhat, stats);
}

// Elementwise passes: a block covers rows_per_block rows (8, more when grid.y would pass its
// limit) by kApplyThreads x kVec values of a frame (grid.x over the frame, grid.y over the rows);
// padding rows get zeros. Frames of a multiple of 4 values go four at a time (float4: rows stay
// 16-byte aligned), others one at a time.
constexpr int kApplyThreads = 256, kApplyRows = 8, kMaxGridY = 65535;

int apply_rows_per_block(const BatchNormDims& d) {
  return static_cast<int>(std::max<int64_t>(kApplyRows, ceil_div(int64_t{d.T} * d.B, kMaxGridY)));
}

template <int kVec>
dim3 apply_grid(const BatchNormDims& d) {
  const int rows = d.T * d.B, frame = static_cast<int>(d.C * d.S);
  return dim3(static_cast<unsigned>(ceil_div(frame, kApplyThreads * kVec)),
              static_cast<unsigned>(ceil_div(rows, apply_rows_per_block(d))));
}

// y = valid ? x a + b : 0 (apply), or dx = valid ? dy ca + x cb + cc : 0 (backward), per channel
// c = j / S of frame value j; with kPerUtterance the coefficients of row (t, b) start at b * C.
template <int kVec, bool kBackwardPass, bool kPerUtterance>
__global__ void apply_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                             float* __restrict__ out, const int* __restrict__ lengths,
                             const float* __restrict__ ca, const float* __restrict__ cb,
                             const float* __restrict__ cc, int B, int rows, int rows_per_block,
                             int frame, int S) {
  const int j0 = (blockIdx.x * kApplyThreads + threadIdx.x) * kVec;
  if (j0 >= frame) return;
  float a[kVec], b[kVec], c[kVec];
  int ch[kVec];
#pragma unroll
  for (int v = 0; v < kVec; ++v) ch[v] = (S == 1 ? j0 + v : (j0 + v) / S);
  auto load_coefficients = [&](int group_offset) {
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      const int k = group_offset + ch[v];
      a[v] = __ldg(ca + k), b[v] = __ldg(cb + k), c[v] = kBackwardPass ? __ldg(cc + k) : 0.0f;
    }
  };
  if (!kPerUtterance) load_coefficients(0);
  const int C = frame / S;
  const int row_begin = blockIdx.y * rows_per_block;
  const int row_end = min(rows, row_begin + rows_per_block);
  for (int row = row_begin; row < row_end; ++row) {
    const int t = row / B;
    const int utt = row - t * B;
    const bool valid = t < __ldg(lengths + utt);
    if (kPerUtterance && valid) load_coefficients(utt * C);
    const int i = row * frame + j0;
    float xv[kVec], dv[kVec], r[kVec];
    if (kVec == 4) {
      const float4 x4 = __ldg(reinterpret_cast<const float4*>(x + i));
      xv[0] = x4.x, xv[1] = x4.y, xv[2] = x4.z, xv[3] = x4.w;
      if (kBackwardPass) {
        const float4 d4 = __ldg(reinterpret_cast<const float4*>(dy + i));
        dv[0] = d4.x, dv[1] = d4.y, dv[2] = d4.z, dv[3] = d4.w;
      }
    } else {
      xv[0] = __ldg(x + i);
      if (kBackwardPass) dv[0] = __ldg(dy + i);
    }
#pragma unroll
    for (int v = 0; v < kVec; ++v)
      r[v] = !valid ? 0.0f
                    : (kBackwardPass ? dv[v] * a[v] + xv[v] * b[v] + c[v] : xv[v] * a[v] + b[v]);
    if (kVec == 4) {
      *reinterpret_cast<float4*>(out + i) = make_float4(r[0], r[1], r[2], r[3]);
    } else {
      out[i] = r[0];
    }
  }
}

template <bool kBackwardPass, bool kPerUtterance>
void launch_apply_for(const BatchNormDims& d, const float* x, const float* dy, float* out,
                      const int* lengths, const float* ca, const float* cb, const float* cc,
                      cudaStream_t stream) {
  const int rows = d.T * d.B, frame = static_cast<int>(d.C * d.S);
  const int per_block = apply_rows_per_block(d);
  if (frame % 4 == 0) {
    apply_kernel<4, kBackwardPass, kPerUtterance><<<apply_grid<4>(d), kApplyThreads, 0, stream>>>(
        x, dy, out, lengths, ca, cb, cc, d.B, rows, per_block, frame, static_cast<int>(d.S));
  } else {
    apply_kernel<1, kBackwardPass, kPerUtterance><<<apply_grid<1>(d), kApplyThreads, 0, stream>>>(
        x, dy, out, lengths, ca, cb, cc, d.B, rows, per_block, frame, static_cast<int>(d.S));
  }
  DS2_CUDA_CHECK_LAUNCH();
}

template <bool kBackwardPass>
void launch_apply(const BatchNormDims& d, const float* x, const float* dy, float* out,
                  const int* lengths, const float* ca, const float* cb, const float* cc,
                  cudaStream_t stream) {
  if (d.per_utterance)
    launch_apply_for<kBackwardPass, true>(d, x, dy, out, lengths, ca, cb, cc, stream);
  else
    launch_apply_for<kBackwardPass, false>(d, x, dy, out, lengths, ca, cb, cc, stream);
}

// Per-utterance reductions: one block per (utterance, 32 channels) for {T, B, F} data (32
// channel lanes by 8 row lanes over the utterance's valid frames), or per (utterance, channel)
// for {T, B, C, S} data (threads over its frames * S values); fixed orders, then the block's
// first thread(s) finish the statistics of their (utterance, channel).

// Moments: mean, inv_std and the forward coefficients. Backward: sum(dy) and sum(dy * xhat) into
// the workspace (for dgamma and dbeta) and the dx coefficients.
template <int kMode>
__device__ void finish_utterance(int b, int c, int C, double n, double a, double b_sum,
                                 const float* gamma, const float* beta, float epsilon,
                                 bool input_grad, const BatchNormStats& stats, double* sums_dy,
                                 double* sums_dy_xhat) {
  const int i = b * C + c;
  if (kMode == kMoments) {
    double mean = 0.0, var = 0.0;  // an utterance with no valid frame: mean 0, inv_std 0
    if (n > 0.0) moments(a, b_sum, n, mean, var);
    const float inv_std =
        n > 0.0 ? static_cast<float>(1.0 / sqrt(var + static_cast<double>(epsilon))) : 0.0f;
    forward_coefficients(i, c, static_cast<float>(mean), inv_std, gamma, beta, stats);
  } else {
    sums_dy[i] = a;
    sums_dy_xhat[i] = b_sum;
    if (!input_grad) return;
    backward_coefficients(i, gamma[c], /*data_stats=*/true, n, a, b_sum, stats);
  }
}

template <int kMode>
__global__ void utterance_rows_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                      const int* __restrict__ lengths, int B, int C,
                                      const float* gamma, const float* beta, float epsilon,
                                      bool input_grad, BatchNormStats stats, double* sums_dy,
                                      double* sums_dy_xhat) {
  __shared__ double sa[kRowLanes][33], sb[kRowLanes][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  const int b = blockIdx.y;
  const int len = __ldg(lengths + b);
  double a = 0.0, s = 0.0;
  if (c < C) {
    const float m = kMode == kBackward ? stats.mean[b * C + c] : 0.0f;
    const float is = kMode == kBackward ? stats.inv_std[b * C + c] : 0.0f;
    for (int t = threadIdx.y; t < len; t += kRowLanes) {
      const int i = (t * B + b) * C + c;
      accumulate<kMode>(__ldg(x + i), kMode == kBackward ? __ldg(dy + i) : 0.0f, m, is, a, s);
    }
  }
  double ta, tb;
  sum_row_lanes(sa, sb, a, s, ta, tb);
  if (threadIdx.y == 0 && c < C)
    finish_utterance<kMode>(b, c, C, static_cast<double>(len), ta, tb, gamma, beta, epsilon,
                            input_grad, stats, sums_dy, sums_dy_xhat);
}

template <int kMode>
__global__ void utterance_positions_kernel(const float* __restrict__ x,
                                           const float* __restrict__ dy,
                                           const int* __restrict__ lengths, int B, int C, int S,
                                           const float* gamma, const float* beta, float epsilon,
                                           bool input_grad, BatchNormStats stats, double* sums_dy,
                                           double* sums_dy_xhat) {
  __shared__ double sa[kPositionThreads], sb[kPositionThreads];
  const int c = blockIdx.x;
  const int b = blockIdx.y;
  const int count = __ldg(lengths + b) * S;
  const float m = kMode == kBackward ? stats.mean[b * C + c] : 0.0f;
  const float is = kMode == kBackward ? stats.inv_std[b * C + c] : 0.0f;
  double a = 0.0, s = 0.0;
  for (int e = threadIdx.x; e < count; e += kPositionThreads) {
    const int t = e / S;
    const int i = ((t * B + b) * C + c) * S + (e - t * S);
    accumulate<kMode>(__ldg(x + i), kMode == kBackward ? __ldg(dy + i) : 0.0f, m, is, a, s);
  }
  sum_positions(sa, sb, a, s);
  if (threadIdx.x == 0)
    finish_utterance<kMode>(b, c, C, static_cast<double>(count), sa[0], sb[0], gamma, beta, epsilon,
                            input_grad, stats, sums_dy, sums_dy_xhat);
}

template <int kMode>
void launch_utterance_reduction(const BatchNormDims& d, const float* x, const float* dy,
                                const int* lengths, const float* gamma, const float* beta,
                                float epsilon, bool input_grad, const BatchNormStats& stats,
                                double* sums_dy, double* sums_dy_xhat, cudaStream_t stream) {
  DS2_CHECK(d.per_utterance, "utterance_norm: dims.per_utterance is not set");
  if (int64_t{d.B} * d.C == 0) return;
  check_indexing(d);
  if (d.S == 1) {
    const dim3 grid((d.C + 31) / 32, d.B);
    utterance_rows_kernel<kMode><<<grid, dim3(32, kRowLanes), 0, stream>>>(
        x, dy, lengths, d.B, d.C, gamma, beta, epsilon, input_grad, stats, sums_dy, sums_dy_xhat);
  } else {
    const dim3 grid(d.C, d.B);
    utterance_positions_kernel<kMode><<<grid, kPositionThreads, 0, stream>>>(
        x, dy, lengths, d.B, d.C, static_cast<int>(d.S), gamma, beta, epsilon, input_grad, stats,
        sums_dy, sums_dy_xhat);
  }
  DS2_CUDA_CHECK_LAUNCH();
}

// dgamma[c] += sum over b of sum(dy * xhat), dbeta[c] += sum over b of sum(dy), b in order.
__global__ void utterance_parameter_grads_kernel(const double* sums_dy, const double* sums_dy_xhat,
                                                 int B, int C, float* dgamma, float* dbeta) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  double g = 0.0, be = 0.0;
  for (int b = 0; b < B; ++b) {
    g += sums_dy_xhat[int64_t{b} * C + c];
    be += sums_dy[int64_t{b} * C + c];
  }
  dgamma[c] += static_cast<float>(g);
  dbeta[c] += static_cast<float>(be);
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
  double* partial_sum = workspace;
  double* partial_squares = workspace + int64_t{p.chunks} * dims.C;
  launch_partials<kMoments>(dims, p, x, nullptr, lengths, nullptr, nullptr, partial_sum,
                            partial_squares, stream);
  finalize_stats_kernel<<<channel_blocks(dims.C), kChannelThreads, 0, stream>>>(
      partial_sum, partial_squares, p.chunks, dims.C, n, gamma, beta, momentum, epsilon,
      running_mean, running_var, stats);
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
  if (int64_t{dims.T} * dims.B * dims.C * dims.S == 0) return;
  check_indexing(dims);
  launch_apply<false>(dims, x, nullptr, y, lengths, a, b, nullptr, stream);
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
  if (int64_t{dims.T} * dims.B * dims.C * dims.S == 0) return;
  check_indexing(dims);
  launch_apply<true>(dims, x, dy, dx, lengths, stats.coef_a, stats.coef_b, stats.coef_c, stream);
}

int64_t utterance_norm_workspace(const BatchNormDims& dims) {
  return std::max<int64_t>(1, 2 * int64_t{dims.B} * dims.C);
}

void utterance_norm_stats(const BatchNormDims& dims, const float* x, const int* lengths,
                          const float* gamma, const float* beta, float epsilon,
                          const BatchNormStats& stats, cudaStream_t stream) {
  launch_utterance_reduction<kMoments>(dims, x, nullptr, lengths, gamma, beta, epsilon,
                                       /*input_grad=*/false, stats, nullptr, nullptr, stream);
}

void utterance_norm_backward_stats(const BatchNormDims& dims, const float* x, const float* dy,
                                   const int* lengths, const float* gamma, float* dgamma,
                                   float* dbeta, bool input_grad, const BatchNormStats& stats,
                                   double* workspace, cudaStream_t stream) {
  double* sums_dy = workspace;
  double* sums_dy_xhat = workspace + int64_t{dims.B} * dims.C;
  launch_utterance_reduction<kBackward>(dims, x, dy, lengths, gamma, nullptr, 0.0f, input_grad,
                                        stats, sums_dy, sums_dy_xhat, stream);
  if (int64_t{dims.B} * dims.C == 0) return;
  utterance_parameter_grads_kernel<<<channel_blocks(dims.C), kChannelThreads, 0, stream>>>(
      sums_dy, sums_dy_xhat, dims.B, dims.C, dgamma, dbeta);
  DS2_CUDA_CHECK_LAUNCH();
}

}  // namespace ds2::kernels
