#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda/check.h"
#include "kernels/conv2d_phase.cuh"
#include "kernels/conv2d_windowed.h"
#include "kernels/grid.h"
#include "kernels/mma.cuh"

namespace ds2::kernels::windowed {
namespace {

// A correlation over a window that slides by st frames in time:
//   out[t, b, m, fo * out_stride + out_offset] = bias[m] +
//       sum_{c < C, i < kt, j < J} A(m, c, i, j) in[t st - pt + i, b, c, fo * sf - pf + j]
// for t < out_lengths[b], fo < F_out; input frames t >= in_lengths[b] and frequencies outside
// [0, F_in) read as zero. The forward pass is one such window; the input gradient is one per
// frequency phase, over dy with the kernel flipped (data_window below).
struct Window {
  int T_in, B, C, F_in;
  int T_out, M, F_out;
  int out_pitch, out_stride, out_offset;
  int kt, J, st, sf, pt, pf;  // J even: the tap count rounded up, extra taps weigh zero
};

struct Plan {
  bool ok = false;
  int frames = 0;                           // output frames per CTA
  int chunk_channels = 0;                   // input channels staged at a time
  int chunks = 0, steps = 0, m_blocks = 0;  // steps: k16 steps per chunk
  int copies = 0, row_words = 0, rows = 0;  // staging: copies of each row (shifted by one), words
  int words = 0;                            // staged words per chunk
  int smem_bytes = 0;
  int64_t weight_fragments = 0;  // uint4 per launch: m_blocks x chunks x steps x 2 x 32
};

// The weight-gradient kernel's tiling (plan_weights).
struct WeightPlan {
  bool ok = false;
  int chunk_channels = 0, chunks = 0, m_blocks = 0;
  int frames = 0, dy_frames = 0, fo_pairs = 0, dy_row_words = 0;
  int rows = 0, x_row_words = 0, ksteps = 0;
  int tiles = 0, tiles_per_part = 0, parts = 0;
  int smem_bytes = 0;
};

Plan plan_window(const Window& w);
WeightPlan plan_weights(const Conv2dGeometry& g);

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kTilesPerWarp = 6;        // window kernel: n-tiles (8 positions) per warp at most
constexpr int kWeightTilesPerWarp = 8;  // weight kernel: n-tiles (8 taps) per warp at most
constexpr int kChunkChannels = 4;       // window kernel: input channels staged at a time
constexpr int kMaxSmem = 96 * 1024;
constexpr int kWeightParts = 512;  // weight kernel: about this many CTAs (chunks x parts)

int round_even(int a) {
  return a + (a & 1);
}

int blocks_for(int64_t n) {
  return grid_stride_blocks(n, kThreads);
}

// ---------------------------------------------------------------------------------------------
// Window kernel. Shared memory: the staged window of one chunk of input channels, word
// ((c * rows + row) * copies + copy) * row_words + col holding staged elements 2 col - copy and
// 2 col + 1 - copy of that row (staged element s = input frequency s - pf; copy 1 exists when a
// column can start at an odd element, so that every pair of taps is one aligned word), then
// the reduction-pair table: word offset of k pair kp within the chunk. A column (position) adds
// its own word offset: frame tl and start element fo * sf.

__global__ void __launch_bounds__(kThreads, 2)
    window_kernel(const float* __restrict__ in, const int* __restrict__ in_lengths,
                  const int* __restrict__ out_lengths, const uint4* __restrict__ fragments,
                  const float* __restrict__ bias, Window w, Plan p, float* __restrict__ out) {
  extern __shared__ __align__(16) uint32_t smem[];
  uint32_t* xs = smem;
  int* kwords = reinterpret_cast<int*>(smem + p.words);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, tig = lane % 4;
  const int b = blockIdx.y, mb = blockIdx.z;
  const int t0 = blockIdx.x * p.frames;
  const int out_length = out_lengths[b];
  if (t0 >= out_length) return;  // the whole CTA
  const int nf = min(p.frames, out_length - t0);
  const int npos = nf * w.F_out, ntiles = (npos + 7) / 8;
  const int cc = p.chunk_channels, R = p.rows, rw = p.row_words, copies = p.copies;
  const int kchunk = cc * w.kt * w.J;

  for (int kp = tid; kp < p.steps * 8; kp += kThreads) {
    const int k = 2 * kp;
    int word = 0;  // padding pairs weigh zero; any finite staged word will do
    if (k < kchunk) {
      const int ci = k / w.J, u = (k - ci * w.J) / 2;
      const int c = ci / w.kt, i = ci - c * w.kt;
      word = (c * R + i) * copies * rw + u;
    }
    kwords[kp] = word;
  }
  int colw[kTilesPerWarp];
#pragma unroll
  for (int j = 0; j < kTilesPerWarp; ++j) {
    const int n = (warp + kWarps * j) * 8 + g;
    colw[j] = 0;
    if (n < npos) {
      const int tl = n / w.F_out, fo = n - tl * w.F_out;
      const int e0 = fo * w.sf;
      const int s = copies == 2 ? (e0 & 1) : 0;
      colw[j] = (tl * w.st * copies + s) * rw + (e0 + s) / 2;
    }
  }
  float acc[2][kTilesPerWarp][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int j = 0; j < kTilesPerWarp; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mt][j][r] = 0.0f;

  const int in_length = in_lengths[b];
  for (int chunk = 0; chunk < p.chunks; ++chunk) {
    __syncthreads();  // the previous chunk's products (and the tables) are done
    for (int wi = tid; wi < p.words; wi += kThreads) {
      int r = wi / rw;
      const int col = wi - r * rw;
      const int copy = r % copies;
      r /= copies;
      const int row = r % R, c = chunk * cc + r / R;
      const int t = t0 * w.st - w.pt + row;
      const int e = 2 * col - copy - w.pf;
      float v0 = 0.0f, v1 = 0.0f;
      if (c < w.C && t >= 0 && t < in_length) {
        const float* src = in + ((t * w.B + b) * w.C + c) * w.F_in;
        if (e >= 0 && e < w.F_in) v0 = __ldg(src + e);
        if (e + 1 >= 0 && e + 1 < w.F_in) v1 = __ldg(src + e + 1);
      }
      xs[wi] = pack_bf16x2(v0, v1);
    }
    __syncthreads();
    const uint4* fr = fragments + (static_cast<int64_t>(mb) * p.chunks + chunk) * p.steps * 64;
    uint4 a0 = __ldg(fr + lane), a1 = __ldg(fr + 32 + lane);
    for (int step = 0; step < p.steps; ++step) {
      uint4 n0 = a0, n1 = a1;
      if (step + 1 < p.steps) {
        n0 = __ldg(fr + (step + 1) * 64 + lane);
        n1 = __ldg(fr + (step + 1) * 64 + 32 + lane);
      }
      const int kw0 = kwords[step * 8 + tig], kw1 = kwords[step * 8 + tig + 4];
#pragma unroll
      for (int j = 0; j < kTilesPerWarp; ++j) {
        if (warp + kWarps * j >= ntiles) break;  // warp-uniform
        const uint32_t b0 = xs[colw[j] + kw0], b1 = xs[colw[j] + kw1];
        mma_bf16_16816(acc[0][j][0], acc[0][j][1], acc[0][j][2], acc[0][j][3], a0.x, a0.y, a0.z,
                       a0.w, b0, b1);
        mma_bf16_16816(acc[1][j][0], acc[1][j][1], acc[1][j][2], acc[1][j][3], a1.x, a1.y, a1.z,
                       a1.w, b0, b1);
      }
      a0 = n0, a1 = n1;
    }
  }

#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int j = 0; j < kTilesPerWarp; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int m = mb * 32 + 16 * mt + g + 8 * (r >> 1);
        const int n = (warp + kWarps * j) * 8 + 2 * tig + (r & 1);
        if (m >= w.M || n >= npos) continue;
        const int tl = n / w.F_out, fo = n - tl * w.F_out;
        out[(((t0 + tl) * w.B + b) * w.M + m) * w.out_pitch + fo * w.out_stride + w.out_offset] =
            acc[mt][j][r] + (bias ? __ldg(bias + m) : 0.0f);
      }
}

// Where the window's A(m, c, i, j) comes from: the forward's weight as it is, or, for the input
// gradient of frequency phase `phase`, the weight flipped in time and in the phase's taps.
struct WeightSource {
  bool data = false;
  int conv_in_channels = 0, kernel_f = 0, stride_f = 0;
  int r = 0, taps_f = 0;  // data: the phase's first tap and tap count
};

__device__ __forceinline__ float window_weight(const float* __restrict__ weight, const Window& w,
                                               const Plan& p, const WeightSource& src, int m,
                                               int chunk, int k) {
  const int kchunk = p.chunk_channels * w.kt * w.J;
  if (m >= w.M || k >= kchunk) return 0.0f;
  const int ci = k / w.J, j = k - ci * w.J;
  const int cl = ci / w.kt, i = ci - cl * w.kt;
  const int c = chunk * p.chunk_channels + cl;
  if (c >= w.C) return 0.0f;
  if (!src.data) {
    if (j >= src.kernel_f) return 0.0f;
    return __ldg(weight + ((m * w.C + c) * w.kt + i) * src.kernel_f + j);
  }
  const int q = w.J - 1 - j;
  if (q >= src.taps_f) return 0.0f;
  const int jf = src.r + src.stride_f * q, it = w.kt - 1 - i;
  return __ldg(weight + ((c * src.conv_in_channels + m) * w.kt + it) * src.kernel_f + jf);
}

// Fragments [m block][chunk][step][m tile][lane], a uint4 = the mma A registers a0..a3 (rows g,
// g + 8, k pairs tig, tig + 4 of the 16 x 16 tile).
__global__ void swizzle_kernel(const float* __restrict__ weight, Window w, Plan p, WeightSource src,
                               uint4* __restrict__ fragments) {
  const int64_t n = p.weight_fragments;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int lane = static_cast<int>(e % 32);
    int64_t rest = e / 32;
    const int mt = static_cast<int>(rest % 2);
    rest /= 2;
    const int step = static_cast<int>(rest % p.steps);
    rest /= p.steps;
    const int chunk = static_cast<int>(rest % p.chunks);
    const int mb = static_cast<int>(rest / p.chunks);
    const int g = lane / 4, tig = lane % 4;
    uint32_t reg[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int m = mb * 32 + 16 * mt + g + 8 * (q & 1);
      const int k = step * 16 + 2 * tig + 8 * (q >> 1);
      reg[q] = pack_bf16x2(window_weight(weight, w, p, src, m, chunk, k),
                           window_weight(weight, w, p, src, m, chunk, k + 1));
    }
    fragments[e] = make_uint4(reg[0], reg[1], reg[2], reg[3]);
  }
}

void allow_smem(const void* kernel) {
  DS2_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem));
}

void launch_window(const float* in, const int* in_lengths, const int* out_lengths,
                   const float* weight, const float* bias, const Window& w, const Plan& p,
                   const WeightSource& src, uint4* fragments, float* out, cudaStream_t stream) {
  allow_smem(reinterpret_cast<const void*>(window_kernel));  // per call: the setting is per device
  swizzle_kernel<<<blocks_for(p.weight_fragments), kThreads, 0, stream>>>(weight, w, p, src,
                                                                          fragments);
  DS2_CUDA_CHECK_LAUNCH();
  const dim3 grid(ceil_div(w.T_out, p.frames), w.B, p.m_blocks);
  window_kernel<<<grid, kThreads, p.smem_bytes, stream>>>(in, in_lengths, out_lengths, fragments,
                                                          bias, w, p, out);
  DS2_CUDA_CHECK_LAUNCH();
}

Window forward_window(const Conv2dGeometry& g) {
  Window w;
  w.T_in = g.T, w.B = g.B, w.C = g.C, w.F_in = g.F;
  w.T_out = g.T_out, w.M = g.C_out, w.F_out = g.F_out;
  w.out_pitch = g.F_out, w.out_stride = 1, w.out_offset = 0;
  w.kt = g.kernel_t, w.J = round_even(g.kernel_f), w.st = g.stride_t, w.sf = g.stride_f;
  w.pt = g.kernel_t / 2, w.pf = g.kernel_f / 2;
  return w;
}

// The input gradient's frequency phase `phase` (f = f_q sf + phase): taps jf = r + sf q reach it
// from output frequency f_q + d - q; flipped (q' = J - 1 - q, i' = kt - 1 - i) that is a window
// over dy with frequency stride 1 and offset J - 1 - d.
Window data_window(const Conv2dGeometry& g, int phase, WeightSource* src) {
  const Conv2dPhase ph = conv2d_phase(g, phase);
  Window w;
  w.T_in = g.T_out, w.B = g.B, w.C = g.C_out, w.F_in = g.F_out;
  w.T_out = g.T, w.M = g.C, w.F_out = ph.freqs;
  w.out_pitch = g.F, w.out_stride = g.stride_f, w.out_offset = phase;
  w.kt = g.kernel_t, w.J = round_even(ceil_div(g.kernel_f, g.stride_f)), w.st = 1, w.sf = 1;
  w.pt = g.kernel_t - 1 - g.kernel_t / 2, w.pf = w.J - 1 - ph.d;
  if (src) {
    src->data = true;
    src->conv_in_channels = g.C, src->kernel_f = g.kernel_f;
    src->stride_f = g.stride_f, src->r = ph.r, src->taps_f = ph.taps_f;
  }
  return w;
}

// ---------------------------------------------------------------------------------------------
// Weight-gradient kernel: rows c_out (A = dy), columns the taps (c, i, jf) of a chunk of input
// channels (B = x patches), reduction over output positions (frame tl, frequency pair fo, fo + 1)
// of the frame tiles of one part. dy is staged as [frame][c_out][pair]; x as
// [c][row][phase][copy][word]: staged element s = jf + fo sf of a row sits in phase s mod sf at
// h = s / sf, copy c at h + c, so the elements of positions fo and fo + 1 (h, h + 1) are one
// aligned word in the copy whose parity matches the tap.

__global__ void __launch_bounds__(kThreads, 2)
    weight_kernel(const float* __restrict__ x, const int* __restrict__ in_lengths,
                  const float* __restrict__ dy, const int* __restrict__ out_lengths,
                  Conv2dGeometry g, WeightPlan p, float* __restrict__ partials) {
  extern __shared__ __align__(16) uint32_t smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gr = lane / 4, tig = lane % 4;
  const int chunk = blockIdx.x, part = blockIdx.y, mb = blockIdx.z;
  const int cc = p.chunk_channels, R = p.rows, sf = g.stride_f, xrw = p.x_row_words;
  const int dyrw = p.dy_row_words, pairs = p.fo_pairs;
  const int dy_words = p.dy_frames * 32 * dyrw;
  const int x_words = cc * R * sf * 2 * xrw;
  uint32_t* dys = smem;
  uint32_t* xs = smem + dy_words;
  int* apos = reinterpret_cast<int*>(xs + x_words);
  int* bpos = apos + p.ksteps * 8;
  const int taps = g.kernel_t * g.kernel_f, ntaps = cc * taps, ntiles = (ntaps + 7) / 8;
  const int pf = g.kernel_f / 2, pt = g.kernel_t / 2;

  for (int kp = tid; kp < p.ksteps * 8; kp += kThreads) {
    const int tl = kp / pairs, fp = kp - tl * pairs;
    apos[kp] = tl * 32 * dyrw + fp;  // dy_frames covers every step
    bpos[kp] = tl < p.frames ? tl * g.stride_t * sf * 2 * xrw + fp : 0;  // beyond: dy is 0
  }
  int tapw[kWeightTilesPerWarp];
#pragma unroll
  for (int j = 0; j < kWeightTilesPerWarp; ++j) {
    const int n = (warp + kWarps * j) * 8 + gr;
    tapw[j] = 0;
    if (n < ntaps) {
      const int cl = n / taps, rest = n - cl * taps;
      const int i = rest / g.kernel_f, jf = rest - i * g.kernel_f;
      const int ph = jf % sf, hq = jf / sf, cs = hq & 1;
      tapw[j] = (((cl * R + i) * sf + ph) * 2 + cs) * xrw + (hq + cs) / 2;
    }
  }
  float acc[2][kWeightTilesPerWarp][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int j = 0; j < kWeightTilesPerWarp; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mt][j][r] = 0.0f;
  float bias_sum = 0.0f;  // chunk 0: row tid / 8, this thread's share of the tiles' dy

  const int tb = ceil_div(g.T_out, p.frames);
  const int tile_end = min(p.tiles, (part + 1) * p.tiles_per_part);
  for (int tile = part * p.tiles_per_part; tile < tile_end; ++tile) {
    const int b = tile / tb, t0 = (tile - b * tb) * p.frames;
    const int out_length = out_lengths[b];
    if (t0 >= out_length) continue;  // the whole CTA
    const int nf = min(p.frames, out_length - t0), in_length = in_lengths[b];
    __syncthreads();  // the previous tile's products are done
    for (int wi = tid; wi < dy_words; wi += kThreads) {
      const int r = wi / dyrw, col = wi - r * dyrw;
      const int tl = r / 32, m = mb * 32 + (r - tl * 32), fo = 2 * col;
      float v0 = 0.0f, v1 = 0.0f;
      if (tl < nf && m < g.C_out && fo < g.F_out) {
        const float* src = dy + (((t0 + tl) * g.B + b) * g.C_out + m) * g.F_out + fo;
        v0 = __ldg(src);
        if (fo + 1 < g.F_out) v1 = __ldg(src + 1);
      }
      dys[wi] = pack_bf16x2(v0, v1);
    }
    for (int wi = tid; wi < x_words; wi += kThreads) {
      int r = wi / xrw;
      const int col = wi - r * xrw;
      const int copy = r % 2;
      r /= 2;
      const int ph = r % sf;
      r /= sf;
      const int row = r % R, c = chunk * cc + r / R;
      const int t = t0 * g.stride_t - pt + row;
      float v[2] = {0.0f, 0.0f};
      if (c < g.C && t >= 0 && t < in_length) {
        const float* src = x + ((t * g.B + b) * g.C + c) * g.F;
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const int h = 2 * col + q - copy;
          const int e = h * sf + ph - pf;
          if (h >= 0 && e >= 0 && e < g.F) v[q] = __ldg(src + e);
        }
      }
      xs[wi] = pack_bf16x2(v[0], v[1]);
    }
    __syncthreads();
    if (chunk == 0) {
      const int ml = tid / 8;
      for (int wi = tid % 8; wi < p.dy_frames * dyrw; wi += 8) {
        const int tl = wi / dyrw, col = wi - tl * dyrw;
        const uint32_t word = dys[(tl * 32 + ml) * dyrw + col];
        bias_sum += __uint_as_float(word << 16) + __uint_as_float(word & 0xffff0000u);
      }
    }
    for (int step = 0; step < p.ksteps; ++step) {
      const int kp0 = step * 8 + tig, kp1 = kp0 + 4;
      const int a_0 = apos[kp0], a_1 = apos[kp1], b_0 = bpos[kp0], b_1 = bpos[kp1];
      uint32_t a[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const int row0 = (16 * mt + gr) * dyrw, row1 = row0 + 8 * dyrw;
        a[mt][0] = dys[a_0 + row0], a[mt][1] = dys[a_0 + row1];
        a[mt][2] = dys[a_1 + row0], a[mt][3] = dys[a_1 + row1];
      }
#pragma unroll
      for (int j = 0; j < kWeightTilesPerWarp; ++j) {
        if (warp + kWarps * j >= ntiles) break;  // warp-uniform
        const uint32_t b0 = xs[tapw[j] + b_0], b1 = xs[tapw[j] + b_1];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
          mma_bf16_16816(acc[mt][j][0], acc[mt][j][1], acc[mt][j][2], acc[mt][j][3], a[mt][0],
                         a[mt][1], a[mt][2], a[mt][3], b0, b1);
      }
    }
  }

  const int K = g.C * taps, columns = K + 1;
  float* out = partials + static_cast<int64_t>(part) * g.C_out * columns;
  const int col0 = chunk * cc * taps;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int j = 0; j < kWeightTilesPerWarp; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int m = mb * 32 + 16 * mt + gr + 8 * (r >> 1);
        const int n = (warp + kWarps * j) * 8 + 2 * tig + (r & 1);
        if (m < g.C_out && n < ntaps && col0 + n < K) out[m * columns + col0 + n] = acc[mt][j][r];
      }
  if (chunk == 0) {
    // The 8 shares of a row, added in a fixed pattern.
    bias_sum += __shfl_xor_sync(0xffffffffu, bias_sum, 1);
    bias_sum += __shfl_xor_sync(0xffffffffu, bias_sum, 2);
    bias_sum += __shfl_xor_sync(0xffffffffu, bias_sum, 4);
    const int m = mb * 32 + tid / 8;
    if (tid % 8 == 0 && m < g.C_out) out[m * columns + K] = bias_sum;
  }
}

Plan plan_window(const Window& w) {
  Plan p;
  if (w.F_out <= 0 || w.M <= 0 || w.C <= 0 || w.kt <= 0 || w.st <= 0 || w.J <= 0 || (w.J & 1))
    return p;
  p.copies = w.sf % 2 == 0 ? 1 : 2;
  const int span = (w.F_out - 1) * w.sf + w.J;  // staged elements a row's columns read
  p.row_words = round_even(span + p.copies - 1) / 2;
  if (p.copies == 2)  // copy 1 of a row starts half a bank sweep away from copy 0
    while (p.row_words % 32 < 8 || p.row_words % 32 > 24) ++p.row_words;
  p.chunk_channels = std::min(kChunkChannels, w.C);
  p.chunks = ceil_div(w.C, p.chunk_channels);
  p.steps = ceil_div(p.chunk_channels * w.kt * w.J, 16);
  p.m_blocks = ceil_div(w.M, 32);
  p.frames = std::min(32, kWarps * kTilesPerWarp * 8 / w.F_out);
  for (; p.frames >= 1; --p.frames) {
    p.rows = (p.frames - 1) * w.st + w.kt;
    p.words = p.chunk_channels * p.rows * p.copies * p.row_words;
    p.smem_bytes = (p.words + p.steps * 8) * 4;
    if (p.smem_bytes <= kMaxSmem) break;
  }
  if (p.frames < 1) return p;
  p.weight_fragments = int64_t{p.m_blocks} * p.chunks * p.steps * 64;
  p.ok = true;
  return p;
}

WeightPlan plan_weights(const Conv2dGeometry& g) {
  WeightPlan p;
  const int taps = g.kernel_t * g.kernel_f;
  const int max_taps = kWarps * kWeightTilesPerWarp * 8;
  if (taps > max_taps || g.F_out <= 0 || g.C <= 0 || g.C_out <= 0) return p;
  p.chunk_channels = std::min(g.C, max_taps / taps);
  p.chunks = ceil_div(g.C, p.chunk_channels);
  p.m_blocks = ceil_div(g.C_out, 32);
  p.fo_pairs = ceil_div(g.F_out, 2);
  p.dy_row_words = p.fo_pairs;
  while (p.dy_row_words % 8 != 4) ++p.dy_row_words;  // A fragment rows on distinct banks
  p.x_row_words = ceil_div(2 * p.fo_pairs + (g.kernel_f - 1) / g.stride_f + 1, 2);
  for (p.frames = std::max(1, std::min(32, 192 / p.fo_pairs)); p.frames >= 1; --p.frames) {
    p.ksteps = ceil_div(p.frames * p.fo_pairs, 8);
    p.dy_frames = ceil_div(p.ksteps * 8, p.fo_pairs);
    p.rows = (p.frames - 1) * g.stride_t + g.kernel_t;
    const int words = p.dy_frames * 32 * p.dy_row_words +
                      p.chunk_channels * p.rows * g.stride_f * 2 * p.x_row_words + 2 * p.ksteps * 8;
    p.smem_bytes = words * 4;
    if (p.smem_bytes <= kMaxSmem) break;
  }
  if (p.frames < 1) return p;
  p.tiles = g.B * ceil_div(g.T_out, p.frames);
  if (p.tiles <= 0) return p;
  const int target =
      static_cast<int>(std::max<int64_t>(1, ceil_div(kWeightParts, p.chunks * p.m_blocks)));
  p.parts = std::min(p.tiles, target);
  p.tiles_per_part = ceil_div(p.tiles, p.parts);
  p.parts = ceil_div(p.tiles, p.tiles_per_part);
  p.ok = true;
  return p;
}

bool has_frames(const Conv2dGeometry& g) {
  return g.B > 0 && g.T > 0 && g.T_out > 0;
}
int64_t forward_fragments(const Conv2dGeometry& g) {
  return forward_usable(g) ? plan_window(forward_window(g)).weight_fragments : 0;
}
}  // namespace

bool forward_usable(const Conv2dGeometry& g) {
  return has_frames(g) && plan_window(forward_window(g)).ok;
}
bool data_usable(const Conv2dGeometry& g) {
  return has_frames(g) && g.stride_t == 1 && plan_window(data_window(g, 0, nullptr)).ok;
}
int weight_parts(const Conv2dGeometry& g) {
  return plan_weights(g).parts;
}

bool weights_usable(const Conv2dGeometry& g) {
  return has_frames(g) && plan_weights(g).ok;
}

int64_t weight_fragments(const Conv2dGeometry& g) {
  int64_t n = forward_fragments(g);
  if (data_usable(g))
    n += int64_t{g.stride_f} * plan_window(data_window(g, 0, nullptr)).weight_fragments;
  return n;
}

void forward(const float* x, const int* in_lengths, const int* out_lengths, const float* w,
             const float* bias, const Conv2dGeometry& g, uint4* fragments, float* y,
             cudaStream_t stream) {
  const Window win = forward_window(g);
  const Plan p = plan_window(win);
  DS2_CHECK(p.ok, "conv2d: the windowed kernels do not take this geometry");
  WeightSource src;
  src.conv_in_channels = g.C, src.kernel_f = g.kernel_f;
  src.stride_f = g.stride_f;
  launch_window(x, in_lengths, out_lengths, w, bias, win, p, src, fragments, y, stream);
}

void backward_data(const float* dy, const int* out_lengths, const int* in_lengths, const float* w,
                   const Conv2dGeometry& g, uint4* fragments, float* dx, cudaStream_t stream) {
  // One plan for every phase (sized by phase 0, which has the most frequencies), the fragments
  // of each phase after the forward's.
  const Plan p = plan_window(data_window(g, 0, nullptr));
  DS2_CHECK(p.ok, "conv2d: the windowed kernels do not take this geometry");
  uint4* phase_fragments = fragments + forward_fragments(g);
  for (int phase = 0; phase < g.stride_f; ++phase) {
    WeightSource src;
    const Window win = data_window(g, phase, &src);
    if (win.F_out <= 0) continue;
    launch_window(dy, out_lengths, in_lengths, w, nullptr, win, p, src, phase_fragments, dx,
                  stream);
    phase_fragments += p.weight_fragments;
  }
}

int backward_weights(const float* x, const int* in_lengths, const float* dy, const int* out_lengths,
                     const Conv2dGeometry& g, float* partials, cudaStream_t stream) {
  allow_smem(reinterpret_cast<const void*>(weight_kernel));  // per call: the setting is per device
  const WeightPlan p = plan_weights(g);
  DS2_CHECK(p.ok, "conv2d: the windowed kernels do not take this geometry");
  const dim3 grid(p.chunks, p.parts, p.m_blocks);
  weight_kernel<<<grid, kThreads, p.smem_bytes, stream>>>(x, in_lengths, dy, out_lengths, g, p,
                                                          partials);
  DS2_CUDA_CHECK_LAUNCH();
  return p.parts;
}

}  // namespace ds2::kernels::windowed
