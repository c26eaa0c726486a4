#include "core/cuda/check.h"
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

// Device twins of Conv2dGeometry's host helpers (its header stays plain C++).
__device__ inline int64_t patch_size(const Conv2dGeometry& g) {
  return static_cast<int64_t>(g.C) * g.kernel_t * g.kernel_f;
}
__device__ inline int64_t out_frame_size(const Conv2dGeometry& g) {
  return static_cast<int64_t>(g.C_out) * g.F_out;
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

// One thread per col element; consecutive threads write consecutive patch entries.
__global__ void im2col_kernel(const float* x, const int* in_lengths, const int* frames, int count,
                              Conv2dGeometry g, float* col) {
  const int kt = g.kernel_t, kf = g.kernel_f;
  const int64_t K = patch_size(g);
  const int64_t n = static_cast<int64_t>(count) * g.F_out * K;
  for (int64_t e = first_index(); e < n; e += grid_stride()) {
    const int64_t row = e / K;
    const int k = static_cast<int>(e - row * K);
    const int j = static_cast<int>(row / g.F_out), fo = static_cast<int>(row % g.F_out);
    const int jf = k % kf, i = (k / kf) % kt, c = k / (kf * kt);
    const int frame = frames[j];
    const int t_out = frame / g.B, b = frame % g.B;
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
  const int64_t frame_size = out_frame_size(g);
  const int64_t N = static_cast<int64_t>(count) * g.F_out;
  const int64_t n = static_cast<int64_t>(count) * frame_size;
  for (int64_t e = first_index(); e < n; e += grid_stride()) {
    const int j = static_cast<int>(e / frame_size);
    const int r = static_cast<int>(e - j * frame_size);
    const int c = r / g.F_out, f = r % g.F_out;
    const float v = gemm_out[c * N + static_cast<int64_t>(j) * g.F_out + f];
    y[frames[j] * frame_size + r] = bias ? v + bias[c] : v;
  }
}

// One thread per element of grad_rows {count * F_out, C_out}.
__global__ void gather_grad_output_kernel(const float* dy, const int* frames, int count,
                                          Conv2dGeometry g, float* grad_rows) {
  const int64_t frame_size = out_frame_size(g);
  const int64_t n = static_cast<int64_t>(count) * frame_size;
  for (int64_t e = first_index(); e < n; e += grid_stride()) {
    const int64_t row = e / g.C_out;
    const int c = static_cast<int>(e - row * g.C_out);
    const int j = static_cast<int>(row / g.F_out), f = static_cast<int>(row % g.F_out);
    grad_rows[e] = dy[frames[j] * frame_size + static_cast<int64_t>(c) * g.F_out + f];
  }
}

// One thread per input element (t, b, c, f) of the time range. It visits the (output frame,
// tap) pairs that read it in a fixed order: time taps i ascending, then frequency taps jf
// ascending. Output frame t' reads input time t' * st - kt/2 + i, so this element is read by tap
// i of t' = (t + kt/2 - i) / st when that divides exactly; likewise in frequency.
__global__ void col2im_kernel(const float* dcol, const int* in_lengths, const int* frame_index,
                              int first, int count, int t_begin, int t_end, Conv2dGeometry g,
                              float* dx) {
  const int kt = g.kernel_t, kf = g.kernel_f, st = g.stride_t, sf = g.stride_f;
  const int64_t K = patch_size(g);
  const int64_t frame = static_cast<int64_t>(g.C) * g.F;
  const int64_t n = static_cast<int64_t>(t_end - t_begin) * g.B * frame;
  for (int64_t e = first_index(); e < n; e += grid_stride()) {
    const int64_t row = e / frame;  // (t - t_begin) * B + b
    const int within = static_cast<int>(e - row * frame);
    const int c = within / g.F, f = within % g.F;
    const int t = t_begin + static_cast<int>(row / g.B), b = static_cast<int>(row % g.B);
    if (t >= in_lengths[b]) continue;
    float sum = 0.0f;
    for (int i = 0; i < kt; ++i) {
      const int q = t + kt / 2 - i;  // = st * t' for the output frame t' this tap serves
      if (q < 0) break;              // q only decreases with i
      if (q % st != 0) continue;
      const int t_out = q / st;
      if (t_out >= g.T_out) continue;
      const int idx = frame_index[static_cast<int64_t>(t_out) * g.B + b];
      if (idx < first || idx >= first + count) continue;  // padding (-1) or another chunk
      const float* patch_row =
          dcol + static_cast<int64_t>(idx - first) * g.F_out * K + (c * kt + i) * kf;
      for (int jf = 0; jf < kf; ++jf) {
        const int p = f + kf / 2 - jf;  // = sf * f'
        if (p < 0) break;
        if (p % sf != 0) continue;
        const int fo = p / sf;
        if (fo >= g.F_out) continue;
        sum += patch_row[static_cast<int64_t>(fo) * K + jf];
      }
    }
    const int64_t at = (static_cast<int64_t>(t) * g.B + b) * frame + within;
    dx[at] += sum;
  }
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
  im2col_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, in_lengths, frames, count, g, col);
  DS2_CUDA_CHECK_LAUNCH();
}

void conv2d_scatter_output(const float* gemm_out, const float* bias, const int* frames, int count,
                           const Conv2dGeometry& g, float* y, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(count) * g.out_frame_size();
  if (n <= 0) return;
  scatter_output_kernel<<<blocks_for(n), kThreads, 0, stream>>>(gemm_out, bias, frames, count, g,
                                                                y);
  DS2_CUDA_CHECK_LAUNCH();
}

void conv2d_gather_grad_output(const float* dy, const int* frames, int count,
                               const Conv2dGeometry& g, float* grad_rows, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(count) * g.out_frame_size();
  if (n <= 0) return;
  gather_grad_output_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dy, frames, count, g,
                                                                    grad_rows);
  DS2_CUDA_CHECK_LAUNCH();
}

void conv2d_col2im(const float* dcol, const int* in_lengths, const int* frame_index, int first,
                   int count, int t_begin, int t_end, const Conv2dGeometry& g, float* dx,
                   cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(t_end - t_begin) * g.B * g.C * g.F;
  if (n <= 0 || count <= 0) return;
  col2im_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dcol, in_lengths, frame_index, first, count,
                                                        t_begin, t_end, g, dx);
  DS2_CUDA_CHECK_LAUNCH();
}

}  // namespace ds2::kernels
