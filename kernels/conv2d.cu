#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda/check.h"
#include "core/error.h"
#include "kernels/conv2d.h"
#include "kernels/conv2d_phase.cuh"
#include "kernels/conv2d_windowed.h"
#include "kernels/grid.h"
#include "kernels/mma.cuh"

namespace ds2::kernels {
namespace {

constexpr int kThreads = 256;  // the small table kernels

int blocks_for(int64_t n) {
  return grid_stride_blocks(n, kThreads);
}

__device__ inline int first_index() {
  return blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ inline int grid_stride() {
  return gridDim.x * blockDim.x;
}

// The GEMM tiling shared by the three convolution kernels: a CTA of 128 threads (4 warps)
// computes a kBM x kBN tile of its output (rows: channels, columns: positions or patch entries)
// over slices of the reduction, double-buffered in shared memory with a register prefetch of the
// next slice (one barrier per slice). Two arithmetic modes, picked by the context's matmul
// precision:
// - fp32 (Mode<false>): slices of 8. Thread (ty, tx) = (tid / 32, tid % 32) owns rows
//   [8 ty, 8 ty + 8) and columns [4 tx, 4 tx + 4) and [128 + 4 tx, 128 + 4 tx + 4): 8 x 8 FMA
//   accumulators; per reduction step it reads two float4 of A (the same for the whole warp: a
//   broadcast) and two float4 of B (a warp reads 512 consecutive bytes twice: conflict-free).
// - bf16 (Mode<true>): slices of 16, operands rounded to bf16 (nearest even) when stored to shared
//   memory as (k, k + 1) pairs, products on tensor cores (mma.sync m16n8k16, fp32 accumulation).
//   Warp w owns all 32 rows and columns [64 w, 64 w + 64): 2 x 8 mma tiles, 64 accumulators.
constexpr int kBM = 32, kBN = 256, kGemmThreads = 128;
constexpr int kColsPerThread = kBN / kGemmThreads;  // B columns a thread loads: 2
static_assert(kBM == 4 * 8 && kBN == 2 * 4 * 32, "thread tile mapping");

template <bool kBf16>
struct Mode;

template <>
struct Mode<false> {
  static constexpr int kSlice = 8;
  static constexpr int kAStride = kBM + 4;  // padding: the transposing A stores hit 32 banks
  struct Shared {
    float a[2][kSlice][kAStride];  // a[buf][k][row]
    float b[2][kSlice][kBN];       // b[buf][k][col]
  };
};

template <>
struct Mode<true> {
  static constexpr int kSlice = 16;
  // Row strides = 8 mod 32 words: a fragment read (k pair tig, row/column g) hits 32 banks.
  static constexpr int kAStride = kBM + 8, kBStride = kBN + 8;
  struct Shared {
    uint32_t a[2][kSlice / 2][kAStride];  // bf16 pairs (k = 2 kp, 2 kp + 1) of a row
    uint32_t b[2][kSlice / 2][kBStride];  // bf16 pairs of a column
  };
};

// Register prefetch of one reduction slice: A elements e at (a_row(e), a_k(e)) and B elements
// (k kk, column tid + 128 s) at index kk * 2 + s.
template <bool kBf16>
struct Prefetch {
  static constexpr int kSlice = Mode<kBf16>::kSlice;
  static constexpr int kALoads = kBM * kSlice / kGemmThreads;  // 2 or 4
  static constexpr int kBLoads = kSlice * kColsPerThread;      // 16 or 32
  float a[kALoads];
  float b[kBLoads];
};

// A element e of thread tid: row tid / 8 + 16 e with k tid % 8 (fp32), or rows tid / 8 and
// tid / 8 + 16 with the k pair (2 (tid % 8), 2 (tid % 8) + 1) (bf16).
template <bool kBf16>
__device__ __forceinline__ int a_row(int tid, int e) {
  return tid / 8 + 16 * (kBf16 ? e >> 1 : e);
}
template <bool kBf16>
__device__ __forceinline__ int a_k(int tid, int e) {
  return kBf16 ? 2 * (tid % 8) + (e & 1) : tid % 8;
}

__device__ __forceinline__ void store_prefetch(const Prefetch<false>& p, Mode<false>::Shared& s,
                                               int buf, int tid) {
#pragma unroll
  for (int e = 0; e < Prefetch<false>::kALoads; ++e)
    s.a[buf][a_k<false>(tid, e)][a_row<false>(tid, e)] = p.a[e];
#pragma unroll
  for (int kk = 0; kk < Mode<false>::kSlice; ++kk)
#pragma unroll
    for (int sc = 0; sc < kColsPerThread; ++sc) s.b[buf][kk][tid + 128 * sc] = p.b[kk * 2 + sc];
}

__device__ __forceinline__ void store_prefetch(const Prefetch<true>& p, Mode<true>::Shared& s,
                                               int buf, int tid) {
#pragma unroll
  for (int e = 0; e < Prefetch<true>::kALoads; e += 2)
    s.a[buf][tid % 8][a_row<true>(tid, e)] = pack_bf16x2(p.a[e], p.a[e + 1]);
#pragma unroll
  for (int kp = 0; kp < Mode<true>::kSlice / 2; ++kp)
#pragma unroll
    for (int sc = 0; sc < kColsPerThread; ++sc)
      s.b[buf][kp][tid + 128 * sc] = pack_bf16x2(p.b[4 * kp + sc], p.b[4 * kp + 2 + sc]);
}

// fp32: acc[r][c] += sum_k a[k][8 ty + r] * b[k][acc_col(c)].
__device__ __forceinline__ void multiply_tile(const Mode<false>::Shared& s, int buf, int tid,
                                              float (&acc)[8][8]) {
  const int ty = tid / 32, tx = tid % 32;
#pragma unroll
  for (int k = 0; k < Mode<false>::kSlice; ++k) {
    const float4 a0 = *reinterpret_cast<const float4*>(&s.a[buf][k][8 * ty]);
    const float4 a1 = *reinterpret_cast<const float4*>(&s.a[buf][k][8 * ty + 4]);
    const float4 b0 = *reinterpret_cast<const float4*>(&s.b[buf][k][4 * tx]);
    const float4 b1 = *reinterpret_cast<const float4*>(&s.b[buf][k][128 + 4 * tx]);
    const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
    for (int r = 0; r < 8; ++r)
#pragma unroll
      for (int c = 0; c < 8; ++c) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
  }
}

// bf16: acc[4 mt + i][nt] is accumulator register i of mma tile (rows 16 mt.., columns
// 64 warp + 8 nt..). Fragments (PTX ISA, m16n8k16): lane = 4 g + tig; A registers hold rows g and
// g + 8 at k pairs tig and tig + 4; B registers column g at k pairs tig and tig + 4.
__device__ __forceinline__ void multiply_tile(const Mode<true>::Shared& s, int buf, int tid,
                                              float (&acc)[8][8]) {
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, tig = lane % 4;
  uint32_t a[2][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
    a[mt][0] = s.a[buf][tig][16 * mt + g];
    a[mt][1] = s.a[buf][tig][16 * mt + g + 8];
    a[mt][2] = s.a[buf][tig + 4][16 * mt + g];
    a[mt][3] = s.a[buf][tig + 4][16 * mt + g + 8];
  }
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    const int n = 64 * warp + 8 * nt + g;
    const uint32_t b0 = s.b[buf][tig][n], b1 = s.b[buf][tig + 4][n];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
      mma_bf16_16816(acc[4 * mt][nt], acc[4 * mt + 1][nt], acc[4 * mt + 2][nt], acc[4 * mt + 3][nt],
                     a[mt][0], a[mt][1], a[mt][2], a[mt][3], b0, b1);
  }
}

// Tile row and column of accumulator acc[r][c].
template <bool kBf16>
__device__ __forceinline__ int acc_row(int tid, int r) {
  // bf16: register i = r % 4 of an mma tile holds row g (i < 2) or g + 8.
  return kBf16 ? 16 * (r / 4) + (tid % 32) / 4 + 8 * ((r % 4) / 2) : 8 * (tid / 32) + r;
}
template <bool kBf16>
__device__ __forceinline__ int acc_col(int tid, int r, int c) {
  // fp32: columns 4 tx + c (c < 4) and 128 + 4 tx + c - 4; bf16: column 2 tig + (i & 1).
  return kBf16 ? 64 * (tid / 32) + 8 * c + 2 * (tid % 4) + (r & 1)
               : (c < 4 ? 0 : 128 - 4) + 4 * (tid % 32) + c;
}

// The main loop every kernel shares: `load(step, prefetch)` fills the registers of reduction
// slice `step` (zeros beyond the end), the tiles multiply slice by slice.
template <bool kBf16, typename Load>
__device__ __forceinline__ void gemm_main_loop(int steps, const Load& load,
                                               typename Mode<kBf16>::Shared& s,
                                               float (&acc)[8][8]) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int r = 0; r < 8; ++r)
#pragma unroll
    for (int c = 0; c < 8; ++c) acc[r][c] = 0.0f;
  if (steps <= 0) return;
  Prefetch<kBf16> p;
  load(0, p);
  store_prefetch(p, s, 0, tid);
  __syncthreads();
  for (int step = 0; step < steps; ++step) {
    const int buf = step & 1;
    if (step + 1 < steps) load(step + 1, p);
    multiply_tile(s, buf, tid, acc);
    if (step + 1 < steps) {
      // The other buffer was last read in the previous step, before the barrier that ended it.
      store_prefetch(p, s, buf ^ 1, tid);
      __syncthreads();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Tables.

__global__ void list_frames_kernel(const int* lengths, int T, int B, int* frames) {
  const int n = T * B;
  for (int e = first_index(); e < n; e += grid_stride()) {
    const int t = e / B, b = e - t * B;
    if (t >= lengths[b]) continue;
    int idx = t;
    for (int u = 0; u < b; ++u) idx += min(lengths[u], T);
    frames[idx] = e;
  }
}

// Output position p = (j, f') of frame frames[j]: {x offset of (t0, b, 0, f0), -t0,
// in_lengths[b] - t0, f0} with (t0, f0) the window origin (tap (0, 0)), and y's offset of
// (frame, 0, f'). Tap (c, i, jf) then reads x[xbase + i B C F + c F + jf] when
// -t0 <= i < length - t0 and 0 <= f0 + jf < F.
__global__ void positions_kernel(const int* in_lengths, const int* frames, int count,
                                 Conv2dGeometry g, int4* positions, int* out_offsets) {
  const int n = count * g.F_out;
  for (int p = first_index(); p < n; p += grid_stride()) {
    const int j = p / g.F_out, fo = p - j * g.F_out;
    const int frame = frames[j];
    const int t_out = frame / g.B, b = frame - t_out * g.B;
    const int t0 = t_out * g.stride_t - g.kernel_t / 2;
    const int f0 = fo * g.stride_f - g.kernel_f / 2;
    positions[p] = make_int4(((t0 * g.B + b) * g.C) * g.F + f0, -t0, in_lengths[b] - t0, f0);
    out_offsets[p] = frame * g.C_out * g.F_out + fo;
  }
}

// Forward taps k = (c, i, jf) of the patch: {i B C F + c F + jf, i, jf, 0}.
__global__ void forward_taps_kernel(Conv2dGeometry g, int4* taps) {
  const int kt = g.kernel_t, kf = g.kernel_f;
  const int n = g.C * kt * kf;
  for (int k = first_index(); k < n; k += grid_stride()) {
    const int ci = k / kf, jf = k - ci * kf;
    const int c = ci / kt, i = ci - c * kt;
    taps[k] = make_int4(i * g.B * g.C * g.F + c * g.F + jf, i, jf, 0);
  }
}

__host__ __device__ inline int data_taps_per_phase(const Conv2dGeometry& g) {
  return g.C_out * g.kernel_t * ((g.kernel_f + g.stride_f - 1) / g.stride_f);
}

// Backward-data taps of phase `phase`, k = (c_out, i, q): with i = i_div st + i_mod, the output
// frame is t' = (t + kt/2) / st - i_div when (t + kt/2) mod st = i_mod. Entry: {dy offset
// relative to (t'_0 = (t + kt/2) / st, b, 0, f_q + d): c_out F' - q - i_div B C_out F', weight
// offset relative to input channel 0: (c_out C kt + i) kf + r + sf q, i_div, (i_mod << 16) | q}.
__global__ void data_taps_kernel(Conv2dGeometry g, int4* taps) {
  const int per_phase = data_taps_per_phase(g);
  const int n = per_phase * g.stride_f;
  for (int e = first_index(); e < n; e += grid_stride()) {
    const int phase = e / per_phase, k = e - phase * per_phase;
    const Conv2dPhase ph = conv2d_phase(g, phase);
    if (k >= g.C_out * g.kernel_t * ph.taps_f) continue;
    const int ci = k / ph.taps_f, q = k - ci * ph.taps_f;
    const int co = ci / g.kernel_t, i = ci - co * g.kernel_t;
    const int i_div = i / g.stride_t, i_mod = i - i_div * g.stride_t;
    const int out_frame = g.C_out * g.F_out;
    taps[e] = make_int4(co * g.F_out - q - i_div * g.B * out_frame,
                        (co * g.C * g.kernel_t + i) * g.kernel_f + ph.r + g.stride_f * q, i_div,
                        (i_mod << 16) | q);
  }
}

// ---------------------------------------------------------------------------------------------
// Forward: rows c_out, columns output positions, reduction over the patch entries k.

template <bool kBf16>
__global__ void __launch_bounds__(kGemmThreads, 3)
    forward_kernel(const float* __restrict__ x, const float* __restrict__ w,
                   const float* __restrict__ bias, const int4* __restrict__ positions,
                   const int* __restrict__ out_offsets, const int4* __restrict__ taps, int N,
                   Conv2dGeometry g, float* __restrict__ y) {
  constexpr int kSlice = Mode<kBf16>::kSlice;
  __shared__ __align__(16) typename Mode<kBf16>::Shared s;
  const int tid = threadIdx.x;
  const int n0 = blockIdx.x * kBN, m0 = blockIdx.y * kBM;
  const int M = g.C_out, K = g.C * g.kernel_t * g.kernel_f;

  // This thread's B columns (positions n0 + tid + 128 s); an out-of-range column never loads.
  int xbase[kColsPerThread], ilo[kColsPerThread], ihi[kColsPerThread], jlo[kColsPerThread],
      jhi[kColsPerThread];
#pragma unroll
  for (int sc = 0; sc < kColsPerThread; ++sc) {
    const int n = n0 + tid + 128 * sc;
    if (n < N) {
      const int4 pos = positions[n];
      xbase[sc] = pos.x, ilo[sc] = pos.y, ihi[sc] = pos.z, jlo[sc] = -pos.w;
      jhi[sc] = g.F - pos.w;
    } else {
      xbase[sc] = 0, ilo[sc] = 0, ihi[sc] = 0, jlo[sc] = 0, jhi[sc] = 0;
    }
  }
  auto load = [&](int step, Prefetch<kBf16>& p) {
    const int k0 = step * kSlice;
#pragma unroll
    for (int e = 0; e < Prefetch<kBf16>::kALoads; ++e) {
      const int m = m0 + a_row<kBf16>(tid, e), k = k0 + a_k<kBf16>(tid, e);
      p.a[e] = (m < M && k < K) ? __ldg(w + m * K + k) : 0.0f;
    }
#pragma unroll
    for (int kk = 0; kk < kSlice; ++kk) {
      const int k = k0 + kk;
      const int4 tap = k < K ? __ldg(taps + k) : make_int4(0, 0, 0, 0);
      const bool k_ok = k < K;
#pragma unroll
      for (int sc = 0; sc < kColsPerThread; ++sc) {
        const bool ok =
            k_ok && tap.y >= ilo[sc] && tap.y < ihi[sc] && tap.z >= jlo[sc] && tap.z < jhi[sc];
        p.b[kk * 2 + sc] = ok ? __ldg(x + xbase[sc] + tap.x) : 0.0f;
      }
    }
  };
  float acc[8][8];
  gemm_main_loop<kBf16>((K + kSlice - 1) / kSlice, load, s, acc);

#pragma unroll
  for (int c = 0; c < 8; ++c)
#pragma unroll
    for (int r = 0; r < 8; ++r) {
      const int n = n0 + acc_col<kBf16>(tid, r, c), m = m0 + acc_row<kBf16>(tid, r);
      if (n < N && m < M)
        y[out_offsets[n] + m * g.F_out] = acc[r][c] + (bias ? __ldg(bias + m) : 0.0f);
    }
}

// ---------------------------------------------------------------------------------------------
// Backward-data: rows input channels c, columns input positions (frame, f_q) of one frequency
// phase (blockIdx.z), reduction over that phase's taps (c_out, i, q).

template <bool kBf16>
__global__ void __launch_bounds__(kGemmThreads, 3)
    backward_data_kernel(const float* __restrict__ dy, const int* __restrict__ out_lengths,
                         const float* __restrict__ w, const int* __restrict__ in_frames,
                         int in_count, const int4* __restrict__ all_taps, Conv2dGeometry g,
                         float* __restrict__ dx) {
  constexpr int kSlice = Mode<kBf16>::kSlice;
  __shared__ __align__(16) typename Mode<kBf16>::Shared s;
  const int tid = threadIdx.x;
  const int phase = blockIdx.z;
  const Conv2dPhase ph = conv2d_phase(g, phase);
  const int N = in_count * ph.freqs;
  const int n0 = blockIdx.x * kBN, m0 = blockIdx.y * kBM;
  if (n0 >= N) return;  // the whole CTA: this phase has fewer columns than the grid
  const int M = g.C, K = g.C_out * g.kernel_t * ph.taps_f;
  const int4* taps = all_taps + phase * data_taps_per_phase(g);
  const int st = g.stride_t, out_frame = g.C_out * g.F_out;

  // Column (frame j, f_q): t'_0 = (t + kt/2) / st, phase of t, and the ranges of i_div and q
  // whose output position (t'_0 - i_div, f_q + d - q) is valid.
  int dbase[kColsPerThread], ilo[kColsPerThread], ihi[kColsPerThread], tmod[kColsPerThread],
      qlo[kColsPerThread], qhi[kColsPerThread];
#pragma unroll
  for (int sc = 0; sc < kColsPerThread; ++sc) {
    const int n = n0 + tid + 128 * sc;
    if (n < N) {
      const int j = n / ph.freqs, fq = n - j * ph.freqs;
      const int frame = in_frames[j];
      const int t = frame / g.B, b = frame - t * g.B;
      const int tq = t + g.kernel_t / 2;
      const int tdiv = tq / st;
      const int fbase = fq + ph.d;
      dbase[sc] = (tdiv * g.B + b) * out_frame + fbase;
      ilo[sc] = tdiv - out_lengths[b] + 1, ihi[sc] = tdiv + 1, tmod[sc] = tq - tdiv * st;
      qlo[sc] = fbase - g.F_out + 1, qhi[sc] = fbase + 1;
    } else {
      dbase[sc] = 0, ilo[sc] = 0, ihi[sc] = 0, tmod[sc] = -1, qlo[sc] = 0, qhi[sc] = 0;
    }
  }
  const int kk_c = g.kernel_t * g.kernel_f;  // weight stride of one input channel
  auto load = [&](int step, Prefetch<kBf16>& p) {
    const int k0 = step * kSlice;
#pragma unroll
    for (int e = 0; e < Prefetch<kBf16>::kALoads; ++e) {
      const int m = m0 + a_row<kBf16>(tid, e), k = k0 + a_k<kBf16>(tid, e);
      const int woff = k < K ? __ldg(&taps[k].y) : 0;
      p.a[e] = (m < M && k < K) ? __ldg(w + woff + m * kk_c) : 0.0f;
    }
#pragma unroll
    for (int kk = 0; kk < kSlice; ++kk) {
      const int k = k0 + kk;
      const bool k_ok = k < K;
      const int4 tap = k_ok ? __ldg(taps + k) : make_int4(0, 0, 0, 0);
      const int i_mod = tap.w >> 16, q = tap.w & 0xffff;
#pragma unroll
      for (int sc = 0; sc < kColsPerThread; ++sc) {
        const bool ok = k_ok && i_mod == tmod[sc] && tap.z >= ilo[sc] && tap.z < ihi[sc] &&
                        q >= qlo[sc] && q < qhi[sc];
        p.b[kk * 2 + sc] = ok ? __ldg(dy + dbase[sc] + tap.x) : 0.0f;
      }
    }
  };
  float acc[8][8];
  gemm_main_loop<kBf16>((K + kSlice - 1) / kSlice, load, s, acc);

#pragma unroll
  for (int c = 0; c < 8; ++c)
#pragma unroll
    for (int r = 0; r < 8; ++r) {
      const int n = n0 + acc_col<kBf16>(tid, r, c), m = m0 + acc_row<kBf16>(tid, r);
      if (n >= N || m >= M) continue;
      const int j = n / ph.freqs, fq = n - j * ph.freqs;
      dx[in_frames[j] * g.C * g.F + fq * g.stride_f + phase + m * g.F] = acc[r][c];
    }
}

// ---------------------------------------------------------------------------------------------
// Backward-weights: rows c_out, columns the patch entries k (and k = K, the bias, reading 1),
// reduction over the output positions of one partition (blockIdx.z) into its own slice of the
// partials; a second kernel adds the partitions in order.

struct WeightGradPlan {
  int columns;         // K + 1 (the last column is the bias's)
  int partitions;      // fixed by the geometry and the position count (not by the device or mode)
  int partition_size;  // positions per partition, a multiple of both modes' slices
  // The partitions asked for: at least `partitions`, and unlike them never fewer for more
  // positions, so partials sized by it at the largest batch hold every smaller batch's.
  int most_partitions;
};

WeightGradPlan weight_grad_plan(const Conv2dGeometry& g, int out_count) {
  WeightGradPlan plan;
  plan.columns = static_cast<int>(g.patch_size()) + 1;
  const int64_t positions = int64_t{out_count} * g.F_out;
  constexpr int kUnit = Mode<true>::kSlice;
  static_assert(kUnit % Mode<false>::kSlice == 0, "partitions hold whole slices");
  const int64_t steps = (positions + kUnit - 1) / kUnit;
  const int64_t tiles = int64_t{(plan.columns + kBN - 1) / kBN} * ((g.C_out + kBM - 1) / kBM);
  // About 1024 CTAs in all: several waves of 3 CTAs per SM on 132 SMs, partials <= 1024 tiles.
  int64_t parts = (1024 + tiles - 1) / tiles;
  parts = parts < 1 ? 1 : parts;
  parts = parts > steps ? steps : parts;
  if (steps == 0) parts = 0;
  const int64_t units = parts > 0 ? (steps + parts - 1) / parts : 0;
  plan.partition_size = static_cast<int>(units * kUnit);
  plan.partitions = parts > 0 ? static_cast<int>((steps + units - 1) / units) : 0;
  plan.most_partitions = static_cast<int>(parts);
  return plan;
}

template <bool kBf16>
__global__ void __launch_bounds__(kGemmThreads, 3)
    weight_grad_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                       const int4* __restrict__ positions, const int* __restrict__ out_offsets,
                       int N, int partition_size, int columns, Conv2dGeometry g,
                       float* __restrict__ partials) {
  constexpr int kSlice = Mode<kBf16>::kSlice;
  __shared__ __align__(16) typename Mode<kBf16>::Shared s;
  const int tid = threadIdx.x;
  const int n0 = blockIdx.x * kBN, m0 = blockIdx.y * kBM;
  const int M = g.C_out, K = g.C * g.kernel_t * g.kernel_f;
  const int p_begin = blockIdx.z * partition_size;
  const int p_end = min(N, p_begin + partition_size);
  const int kt = g.kernel_t, kf = g.kernel_f;

  // This thread's B columns: patch entry k = n0 + tid + 128 s (kind 0), the bias (1) or none (2).
  int koff[kColsPerThread], ki[kColsPerThread], kj[kColsPerThread], kind[kColsPerThread];
#pragma unroll
  for (int sc = 0; sc < kColsPerThread; ++sc) {
    const int k = n0 + tid + 128 * sc;
    koff[sc] = 0, ki[sc] = 0, kj[sc] = 0;
    kind[sc] = k < K ? 0 : (k == K ? 1 : 2);
    if (k < K) {
      const int ci = k / kf, jf = k - ci * kf;
      const int c = ci / kt, i = ci - c * kt;
      koff[sc] = i * g.B * g.C * g.F + c * g.F + jf, ki[sc] = i, kj[sc] = jf;
    }
  }
  // A: dy rows c_out at positions p0 + a_k (the reduction index is the fast one, as elsewhere).
  auto load = [&](int step, Prefetch<kBf16>& p) {
    const int p0 = p_begin + step * kSlice;
#pragma unroll
    for (int e = 0; e < Prefetch<kBf16>::kALoads; ++e) {
      const int m = m0 + a_row<kBf16>(tid, e), pos = p0 + a_k<kBf16>(tid, e);
      const int base = pos < p_end ? __ldg(out_offsets + pos) : 0;
      p.a[e] = (m < M && pos < p_end) ? __ldg(dy + base + m * g.F_out) : 0.0f;
    }
#pragma unroll
    for (int kk = 0; kk < kSlice; ++kk) {
      const int pos = p0 + kk;
      const bool p_ok = pos < p_end;
      const int4 win = p_ok ? __ldg(positions + pos) : make_int4(0, 0, 0, 0);
#pragma unroll
      for (int sc = 0; sc < kColsPerThread; ++sc) {
        const int f = win.w + kj[sc];
        const bool ok =
            p_ok && kind[sc] == 0 && ki[sc] >= win.y && ki[sc] < win.z && f >= 0 && f < g.F;
        float v = ok ? __ldg(x + win.x + koff[sc]) : 0.0f;
        if (kind[sc] == 1 && p_ok) v = 1.0f;
        p.b[kk * 2 + sc] = v;
      }
    }
  };
  float acc[8][8];
  gemm_main_loop<kBf16>((p_end - p_begin + kSlice - 1) / kSlice, load, s, acc);

  float* out = partials + static_cast<int64_t>(blockIdx.z) * M * columns;
#pragma unroll
  for (int r = 0; r < 8; ++r)
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const int k = n0 + acc_col<kBf16>(tid, r, c), m = m0 + acc_row<kBf16>(tid, r);
      if (k < columns && m < M) out[m * columns + k] = acc[r][c];
    }
}

// dw[m, k] += sum over partitions in order; the last column goes to dbias (when there is one).
__global__ void weight_grad_reduce_kernel(const float* partials, int partitions, int M, int columns,
                                          float* dw, float* dbias) {
  const int n = M * columns;
  const int K = columns - 1;
  for (int e = first_index(); e < n; e += grid_stride()) {
    float sum = 0.0f;
    for (int part = 0; part < partitions; ++part) sum += partials[int64_t{part} * n + e];
    const int m = e / columns, k = e - m * columns;
    if (k < K) {
      dw[m * K + k] += sum;
    } else if (dbias) {
      dbias[m] += sum;
    }
  }
}

// Every offset the kernels form (negative window origins included) stays within 32 bits.
void check_indexing(const Conv2dGeometry& g) {
  const int64_t in_frame = int64_t{g.B} * g.C * g.F;
  const int64_t x_span = (int64_t{g.T} + g.kernel_t + 1) * in_frame + g.F + g.kernel_f;
  const int64_t y_span =
      (int64_t{g.T_out} + g.kernel_t + 1) * g.B * g.out_frame_size() + g.F_out + g.kernel_f;
  const int64_t w_size = g.C_out * g.patch_size() + g.patch_size();
  constexpr int64_t kLimit = int64_t{1} << 31;
  DS2_CHECK(x_span < kLimit && y_span < kLimit && w_size < kLimit,
            "conv2d: tensors of " << x_span << " / " << y_span << " / " << w_size
                                  << " elements exceed 32-bit indexing");
  DS2_CHECK(g.kernel_f < (1 << 15) && g.stride_t < (1 << 15),
            "conv2d: kernel " << g.kernel_f << " or stride " << g.stride_t << " too large");
}

int64_t tap_entries(const Conv2dGeometry& g) {
  return g.patch_size() + int64_t{data_taps_per_phase(g)} * g.stride_f;
}

}  // namespace

void conv2d_list_frames(const int* lengths, int T, int B, int* frames, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(T) * B;
  if (n <= 0) return;
  DS2_CHECK(n < (int64_t{1} << 31), "conv2d: " << n << " frames exceed 32-bit indexing");
  list_frames_kernel<<<blocks_for(n), kThreads, 0, stream>>>(lengths, T, B, frames);
  DS2_CUDA_CHECK_LAUNCH();
}

Conv2dWorkspaceSizes conv2d_workspace_sizes(const Conv2dGeometry& g, int out_count,
                                            bool weight_grad) {
  Conv2dWorkspaceSizes sizes;
  sizes.positions = int64_t{out_count} * g.F_out;
  sizes.taps = tap_entries(g);
  sizes.fragments = windowed::weight_fragments(g);
  if (weight_grad) {
    // By most_partitions: partitions themselves can be more for fewer positions (1000 steps in
    // 300 parts take 250 partitions of 4, 600 take 300 of 2), and partials sized by them at the
    // largest batch grew inside the training loop (10 allocations in the digits recipe).
    const WeightGradPlan plan = weight_grad_plan(g, out_count);
    sizes.partials = int64_t{plan.most_partitions} * g.C_out * plan.columns;
    if (windowed::weights_usable(g)) {
      const int64_t parts = windowed::weight_parts(g);
      sizes.partials = std::max(sizes.partials, parts * g.C_out * plan.columns);
    }
  }
  return sizes;
}

void conv2d_forward(const float* x, const int* in_lengths, const int* out_lengths, const float* w,
                    const float* bias, const int* out_frames, int out_count,
                    const Conv2dGeometry& g, const Conv2dWorkspace& ws, Precision precision,
                    float* y, cudaStream_t stream) {
  const int64_t N = int64_t{out_count} * g.F_out;
  if (N <= 0 || g.C_out <= 0) return;
  check_indexing(g);
  if (precision == Precision::kBf16 && windowed::forward_usable(g)) {
    windowed::forward(x, in_lengths, out_lengths, w, bias, g, ws.fragments, y, stream);
    return;
  }
  positions_kernel<<<blocks_for(N), kThreads, 0, stream>>>(in_lengths, out_frames, out_count, g,
                                                           ws.positions, ws.out_offsets);
  DS2_CUDA_CHECK_LAUNCH();
  forward_taps_kernel<<<blocks_for(g.patch_size()), kThreads, 0, stream>>>(g, ws.taps);
  DS2_CUDA_CHECK_LAUNCH();
  const dim3 grid(static_cast<unsigned>((N + kBN - 1) / kBN), (g.C_out + kBM - 1) / kBM);
  auto* kernel = precision == Precision::kBf16 ? forward_kernel<true> : forward_kernel<false>;
  kernel<<<grid, kGemmThreads, 0, stream>>>(x, w, bias, ws.positions, ws.out_offsets, ws.taps,
                                            static_cast<int>(N), g, y);
  DS2_CUDA_CHECK_LAUNCH();
}

void conv2d_backward_data(const float* dy, const int* out_lengths, const int* in_lengths,
                          const float* w, const int* in_frames, int in_count,
                          const Conv2dGeometry& g, const Conv2dWorkspace& ws, Precision precision,
                          float* dx, cudaStream_t stream) {
  if (in_count <= 0 || g.F <= 0 || g.C <= 0) return;
  check_indexing(g);
  if (precision == Precision::kBf16 && windowed::data_usable(g)) {
    windowed::backward_data(dy, out_lengths, in_lengths, w, g, ws.fragments, dx, stream);
    return;
  }
  int4* taps = ws.taps + g.patch_size();  // after the forward's
  const int64_t entries = int64_t{data_taps_per_phase(g)} * g.stride_f;
  data_taps_kernel<<<blocks_for(entries), kThreads, 0, stream>>>(g, taps);
  DS2_CUDA_CHECK_LAUNCH();
  // Phase 0 has the most input frequencies.
  const int64_t N = int64_t{in_count} * conv2d_phase(g, 0).freqs;
  const dim3 grid(static_cast<unsigned>((N + kBN - 1) / kBN), (g.C + kBM - 1) / kBM, g.stride_f);
  auto* kernel =
      precision == Precision::kBf16 ? backward_data_kernel<true> : backward_data_kernel<false>;
  kernel<<<grid, kGemmThreads, 0, stream>>>(dy, out_lengths, w, in_frames, in_count, taps, g, dx);
  DS2_CUDA_CHECK_LAUNCH();
}

void conv2d_backward_weights(const float* x, const int* in_lengths, const float* dy,
                             const int* out_lengths, const int* out_frames, int out_count,
                             const Conv2dGeometry& g, const Conv2dWorkspace& ws,
                             Precision precision, float* dw, float* dbias, cudaStream_t stream) {
  const int64_t N = int64_t{out_count} * g.F_out;
  if (N <= 0 || g.C_out <= 0) return;
  check_indexing(g);
  const WeightGradPlan plan = weight_grad_plan(g, out_count);
  if (precision == Precision::kBf16 && windowed::weights_usable(g)) {
    const int parts =
        windowed::backward_weights(x, in_lengths, dy, out_lengths, g, ws.partials, stream);
    const int64_t n = int64_t{g.C_out} * plan.columns;
    weight_grad_reduce_kernel<<<blocks_for(n), kThreads, 0, stream>>>(ws.partials, parts, g.C_out,
                                                                      plan.columns, dw, dbias);
    DS2_CUDA_CHECK_LAUNCH();
    return;
  }
  positions_kernel<<<blocks_for(N), kThreads, 0, stream>>>(in_lengths, out_frames, out_count, g,
                                                           ws.positions, ws.out_offsets);
  DS2_CUDA_CHECK_LAUNCH();
  const dim3 grid((plan.columns + kBN - 1) / kBN, (g.C_out + kBM - 1) / kBM, plan.partitions);
  auto* kernel =
      precision == Precision::kBf16 ? weight_grad_kernel<true> : weight_grad_kernel<false>;
  kernel<<<grid, kGemmThreads, 0, stream>>>(x, dy, ws.positions, ws.out_offsets,
                                            static_cast<int>(N), plan.partition_size, plan.columns,
                                            g, ws.partials);
  DS2_CUDA_CHECK_LAUNCH();
  const int64_t n = int64_t{g.C_out} * plan.columns;
  weight_grad_reduce_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      ws.partials, plan.partitions, g.C_out, plan.columns, dw, dbias);
  DS2_CUDA_CHECK_LAUNCH();
}

}  // namespace ds2::kernels
