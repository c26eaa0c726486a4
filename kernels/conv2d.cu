#include "core/cuda/check.h"
#include "core/error.h"
#include "kernels/conv2d.h"

namespace ds2::kernels {
namespace {

constexpr int kThreads = 256;

// A bounded grid; the kernels loop over their elements with a grid stride.
int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  constexpr int64_t kMaxBlocks = int64_t{65535} * 32;
  return static_cast<int>(b < 1 ? 1 : (b < kMaxBlocks ? b : kMaxBlocks));
}

__device__ inline int64_t first_index() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ inline int64_t grid_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// One thread per (t, b) output frame. A valid frame's position in the t-major list is the number
// of valid frames at earlier times plus the valid frames of earlier utterances at time t: O(B)
// per frame, which for the batch sizes of training is far cheaper than a host round trip.
__global__ void list_frames_kernel(const int* out_lengths, int T_out, int B, int* frames,
                                   int* frame_index) {
  const int64_t n = static_cast<int64_t>(T_out) * B;
  for (int64_t e = first_index(); e < n; e += grid_stride()) {
    const int t = static_cast<int>(e / B), b = static_cast<int>(e % B);
    if (t >= out_lengths[b]) {
      frame_index[e] = -1;
      continue;
    }
    int idx = 0;
    for (int u = 0; u < B; ++u) {
      const int length = out_lengths[u];
      idx += length < t ? length : t;
      if (u < b && length > t) ++idx;
    }
    frames[idx] = static_cast<int>(e);
    frame_index[e] = idx;
  }
}

// Per chunk every index below fits in 32 bits (the host checks), so the kernels divide in 32-bit
// arithmetic: 64-bit integer division costs several times more and dominated these kernels.
__device__ inline int first_index32() {
  return blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ inline int grid_stride32() {
  return gridDim.x * blockDim.x;
}

// One thread per col element; consecutive threads write consecutive patch entries.
__global__ void im2col_kernel(const float* x, const int* in_lengths, const int* frames, int count,
                              Conv2dGeometry g, float* col) {
  const int kt = g.kernel_t, kf = g.kernel_f;
  const int K = g.C * kt * kf;
  const int n = count * g.F_out * K;
  for (int e = first_index32(); e < n; e += grid_stride32()) {
    const int row = e / K;
    const int k = e - row * K;
    const int j = row / g.F_out, fo = row - j * g.F_out;
    const int ci = k / kf, jf = k - ci * kf;  // ci = c * kt + i
    const int c = ci / kt, i = ci - c * kt;
    const int frame = frames[j];
    const int t_out = frame / g.B, b = frame - t_out * g.B;
    const int t = t_out * g.stride_t - kt / 2 + i;
    const int f = fo * g.stride_f - kf / 2 + jf;
    float v = 0.0f;
    if (t >= 0 && t < in_lengths[b] && f >= 0 && f < g.F)
      v = x[((static_cast<int64_t>(t) * g.B + b) * g.C + c) * g.F + f];
    col[e] = v;
  }
}

// One thread per output element of the chunk, in y's order within a frame.
__global__ void scatter_output_kernel(const float* gemm_out, const float* bias, const int* frames,
                                      int count, Conv2dGeometry g, float* y) {
  const int frame_size = g.C_out * g.F_out;
  const int N = count * g.F_out;
  const int n = count * frame_size;
  for (int e = first_index32(); e < n; e += grid_stride32()) {
    const int j = e / frame_size;
    const int r = e - j * frame_size;
    const int c = r / g.F_out, f = r - c * g.F_out;
    const float v = gemm_out[c * N + j * g.F_out + f];
    y[static_cast<int64_t>(frames[j]) * frame_size + r] = bias ? v + bias[c] : v;
  }
}

// One thread per element of grad_rows {count * F_out, C_out}.
__global__ void gather_grad_output_kernel(const float* dy, const int* frames, int count,
                                          Conv2dGeometry g, float* grad_rows) {
  const int frame_size = g.C_out * g.F_out;
  const int n = count * frame_size;
  for (int e = first_index32(); e < n; e += grid_stride32()) {
    const int row = e / g.C_out;
    const int c = e - row * g.C_out;
    const int j = row / g.F_out, f = row - j * g.F_out;
    grad_rows[e] = dy[static_cast<int64_t>(frames[j]) * frame_size + c * g.F_out + f];
  }
}

// One thread per input element (t, b, c, f) of the time range. It visits the (output frame,
// tap) pairs that read it in a fixed order: time taps i ascending, then frequency taps jf
// ascending. Output frame t' reads input time t' * st - kt/2 + i, so this element is read by tap
// i of t' = (t + kt/2 - i) / st when that divides exactly, i.e. for i = (t + kt/2) mod st and
// every st-th tap after it; likewise in frequency.
__global__ void col2im_kernel(const float* dcol, const int* in_lengths, const int* frame_index,
                              int first, int count, int t_begin, int t_end, Conv2dGeometry g,
                              float* dx) {
  const int kt = g.kernel_t, kf = g.kernel_f, st = g.stride_t, sf = g.stride_f;
  const int K = g.C * kt * kf;
  const int frame = g.C * g.F;
  const int n = (t_end - t_begin) * g.B * frame;
  for (int e = first_index32(); e < n; e += grid_stride32()) {
    const int row = e / frame;  // (t - t_begin) * B + b
    const int within = e - row * frame;
    const int c = within / g.F, f = within - c * g.F;
    const int tb = row / g.B;
    const int t = t_begin + tb, b = row - tb * g.B;
    if (t >= in_lengths[b]) continue;
    float sum = 0.0f;
    for (int i = (t + kt / 2) % st; i < kt; i += st) {
      const int q = t + kt / 2 - i;  // = st * t' for the output frame t' this tap serves
      if (q < 0) break;              // q only decreases with i
      const int t_out = q / st;
      if (t_out >= g.T_out) continue;
      const int idx = frame_index[t_out * g.B + b];
      if (idx < first || idx >= first + count) continue;  // padding (-1) or another chunk
      const float* patch_row =
          dcol + static_cast<int64_t>(idx - first) * g.F_out * K + (c * kt + i) * kf;
      for (int jf = (f + kf / 2) % sf; jf < kf; jf += sf) {
        const int p = f + kf / 2 - jf;  // = sf * f'
        if (p < 0) break;
        const int fo = p / sf;
        if (fo >= g.F_out) continue;
        sum += patch_row[static_cast<int64_t>(fo) * K + jf];
      }
    }
    const int64_t at = (static_cast<int64_t>(t) * g.B + b) * frame + within;
    dx[at] += sum;
  }
}

void check_32bit(int64_t n, const char* what) {
  DS2_CHECK(n < (int64_t{1} << 31), what << ": " << n
                                         << " elements in one chunk exceed 32-bit "
                                            "indexing; use a smaller column budget");
}

}  // namespace

void conv2d_list_frames(const int* out_lengths, int T_out, int B, int* frames, int* frame_index,
                        cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(T_out) * B;
  if (n <= 0) return;
  list_frames_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out_lengths, T_out, B, frames,
                                                             frame_index);
  DS2_CUDA_CHECK_LAUNCH();
}

void conv2d_im2col(const float* x, const int* in_lengths, const int* frames, int count,
                   const Conv2dGeometry& g, float* col, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(count) * g.F_out * g.patch_size();
  if (n <= 0) return;
  check_32bit(n, "conv2d_im2col");
  im2col_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, in_lengths, frames, count, g, col);
  DS2_CUDA_CHECK_LAUNCH();
}

void conv2d_scatter_output(const float* gemm_out, const float* bias, const int* frames, int count,
                           const Conv2dGeometry& g, float* y, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(count) * g.out_frame_size();
  if (n <= 0) return;
  check_32bit(n, "conv2d");
  scatter_output_kernel<<<blocks_for(n), kThreads, 0, stream>>>(gemm_out, bias, frames, count, g,
                                                                y);
  DS2_CUDA_CHECK_LAUNCH();
}

void conv2d_gather_grad_output(const float* dy, const int* frames, int count,
                               const Conv2dGeometry& g, float* grad_rows, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(count) * g.out_frame_size();
  if (n <= 0) return;
  check_32bit(n, "conv2d");
  gather_grad_output_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dy, frames, count, g,
                                                                    grad_rows);
  DS2_CUDA_CHECK_LAUNCH();
}

void conv2d_col2im(const float* dcol, const int* in_lengths, const int* frame_index, int first,
                   int count, int t_begin, int t_end, const Conv2dGeometry& g, float* dx,
                   cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(t_end - t_begin) * g.B * g.C * g.F;
  if (n <= 0 || count <= 0) return;
  check_32bit(n, "conv2d");
  col2im_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dcol, in_lengths, frame_index, first, count,
                                                        t_begin, t_end, g, dx);
  DS2_CUDA_CHECK_LAUNCH();
}

}  // namespace ds2::kernels
