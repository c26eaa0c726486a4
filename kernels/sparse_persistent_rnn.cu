#include <cstdint>
#include <type_traits>

#include "core/bf16.h"
#include "core/cuda/check.h"
#include "core/error.h"
#include "kernels/async_copy.cuh"
#include "kernels/clipped_relu.cuh"
#include "kernels/cooperative_launch.h"
#include "kernels/persistent_rnn_operands.h"
#include "kernels/sparse_persistent_rnn.h"
#include "kernels/step_barrier.cuh"

namespace ds2::kernels {
namespace {

// Exchange: [2 parities][tiles_max][hpad][batch_tile] fp32.
using DirArgs = PrnnDeviceDirection<float>;

struct Args {
  DirArgs dir[2];
  const int* lengths;
  unsigned int* arrivals;  // per direction: CTAs arrived at the step barriers (0 at launch)
  int T, B, H, hpad, rows, ctas_per_dir, lanes, tiles_max, nbuf;
  float clip;
  int backward;
  int ep_off, len_off;  // bytes; the staged state is at 0
};

struct SmemLayout {
  size_t ep_off, len_off, total;
};

int padded_hidden(const SprnnTiling& t) {
  return (t.hidden + 3) / 4 * 4;
}

int tiles_max(const SprnnTiling& t) {
  return (t.max_batch + t.batch_tile - 1) / t.batch_tile;
}

SmemLayout smem_layout(const SprnnTiling& t) {
  SmemLayout l{};
  size_t off = size_t(t.state_buffers) * padded_hidden(t) * t.batch_tile * sizeof(float);
  l.ep_off = off;
  off += size_t(2) * 2 * tiles_max(t) * t.rows_per_cta * t.batch_tile * sizeof(float);
  l.len_off = off;
  off += size_t(t.max_batch) * sizeof(int);
  l.total = (off + 15) / 16 * 16;
  return l;
}

// A slot of a bf16 kernel is one word: the weight's bf16 bits above its column. Splitting it is
// volatile asm so the compiler cannot hoist the split out of the step loop (that would spend two
// registers per slot, the budget bf16 exists to save).
__device__ __forceinline__ void split_bf16_slot(uint32_t word, float& w, uint32_t& col) {
  asm volatile("{\n\tand.b32 %0, %2, 0xFFFF0000;\n\tand.b32 %1, %2, 0xFFFF;\n\t}"
               : "=f"(w), "=r"(col)
               : "r"(word));
}
// fp32 kernels keep two 16-bit columns per word (low half: the even slot).
template <int HALF>
__device__ __forceinline__ uint32_t column_of(uint32_t pair) {
  uint32_t col;
  if (HALF == 0)
    asm volatile("and.b32 %0, %1, 0xFFFF;" : "=r"(col) : "r"(pair));
  else
    asm volatile("shr.b32 %0, %1, 16;" : "=r"(col) : "r"(pair));
  return col;
}

template <int BT>
struct Lanes;
template <>
struct Lanes<1> {
  using T = float;
  __device__ static void fma(float w, float h, float (&acc)[1]) { acc[0] = fmaf(w, h, acc[0]); }
};
template <>
struct Lanes<4> {
  using T = float4;
  __device__ static void fma(float w, float4 h, float (&acc)[4]) {
    acc[0] = fmaf(w, h.x, acc[0]);
    acc[1] = fmaf(w, h.y, acc[1]);
    acc[2] = fmaf(w, h.z, acc[2]);
    acc[3] = fmaf(w, h.w, acc[3]);
  }
};

// BT: batch rows per pass (1 or 4); S: slots per thread; BF16: values held as bf16.
// Thread tid works on row cta * rows + tid / L as lane tid % L of the row's L lanes.
template <int BT, int S, bool BF16>
__global__ void sprnn_kernel(const Args a) {
  using HV = typename Lanes<BT>::T;
  extern __shared__ __align__(16) unsigned char smem[];
  float* hs = reinterpret_cast<float*>(smem);             // [nbuf][hpad][BT]
  float* ep = reinterpret_cast<float*>(smem + a.ep_off);  // [2][x | h][tiles_max][rows][BT]
  int* len_s = reinterpret_cast<int*>(smem + a.len_off);  // [B]

  const int tid = threadIdx.x, nt = blockDim.x;
  const int di = static_cast<int>(blockIdx.x) >= a.ctas_per_dir ? 1 : 0;
  const int cta = blockIdx.x - di * a.ctas_per_dir;
  const DirArgs d = di ? a.dir[1] : a.dir[0];
  const int H = a.H, B = a.B, T = a.T, hpad = a.hpad, L = a.lanes;
  const int lr = tid / L, q = tid % L, k = cta * a.rows + lr;
  const int tiles = (B + BT - 1) / BT;
  const bool bwd = a.backward != 0;
  const float clip = a.clip;
  const int ep_vals = a.rows * BT;  // epilogue inputs of one tile
  const int ep_h = a.tiles_max * ep_vals;
  const int ep_parity = 2 * ep_h;
  const int64_t xbuf_parity = int64_t{a.tiles_max} * hpad * BT;
  const int64_t hs_buf = int64_t{hpad} * BT;

  for (int i = tid; i < B; i += nt) len_s[i] = a.lengths[i];

  // This thread's kept weights: M[k, col] with M = U (forward) or U^T (backward-data).
  const uint32_t* lay = d.layout + int64_t{cta} * S * nt + tid;
  uint32_t wv_bits[BF16 ? S : 1];
  float wv[BF16 ? 1 : S];
  uint32_t wc[BF16 ? 1 : (S + 1) / 2];
#pragma unroll
  for (int s = 0; s < S; ++s) {
    const uint32_t word = lay[int64_t{s} * nt];
    const uint32_t col = word & 0xFFFFu;
    const bool pad = (word & 0x80000000u) != 0 || k >= H;
    const float v = pad ? 0.0f : (bwd ? d.u[int64_t{col} * H + k] : d.u[int64_t{k} * H + col]);
    if constexpr (BF16) {
      wv_bits[s] = (uint32_t{float_to_bf16(v)} << 16) | col;
    } else {
      wv[s] = v;
      if (s % 2 == 0)
        wc[s / 2] = col;
      else
        wc[s / 2] |= col << 16;
    }
  }
  __syncthreads();

  // Epilogue inputs of step s (x, and h for backward-data), copied a step ahead by the thread
  // that uses them: lane q < BT of a row owns batch row tile * BT + q.
  const bool epilogue = q < BT && k < H;
  auto prefetch = [&](int s) {
    if (!epilogue) return;
    const int t = d.descending ? T - 1 - s : s;
    float* dst = ep + (s & 1) * ep_parity + lr * BT + q;
    for (int tile = 0; tile < tiles; ++tile) {
      const int b = tile * BT + q;
      if (b >= B || t >= len_s[b]) continue;
      const int64_t row = int64_t{t} * B + b;
      cp_async4(dst + tile * ep_vals, d.x + row * d.ld_x + k);
      if (bwd) cp_async4(dst + ep_h + tile * ep_vals, d.h + row * d.ld_h + k);
    }
    cp_async_commit();
  };
  if (T > 0) prefetch(0);

  for (int s = 0; s < T; ++s) {
    const int t = d.descending ? T - 1 - s : s;
    const float* xin = d.xbuf + ((s + 1) & 1) * xbuf_parity;  // the state step s - 1 wrote
    float* xout = d.xbuf + (s & 1) * xbuf_parity;
    const float* epx = ep + (s & 1) * ep_parity + lr * BT + q;
    cp_async_wait_all();

    // Stage a tile's previous state: the exchange array holds it as {hpad, BT} already, so this
    // is one contiguous copy, every 16-byte piece in flight at once (one L2 round trip), through
    // L2 only (other CTAs wrote it before the step barrier). Zeros before step 0.
    auto stage = [&](int tile) {
      float* dst = hs + (a.nbuf == 2 ? (tile & 1) : 0) * hs_buf;
      const float* src = xin + int64_t{tile} * hs_buf;
      for (int i = tid; i < hs_buf / 4; i += nt) cp_async16_cg(dst + 4 * i, src + 4 * i, s > 0);
      cp_async_commit();
    };
    stage(0);
    for (int tile = 0; tile < tiles; ++tile) {
      const float* hb = hs + (a.nbuf == 2 ? (tile & 1) : 0) * hs_buf;
      cp_async_wait_all();  // this thread's pieces of `tile`, the only copy in flight
      __syncthreads();      // everyone's pieces landed, and everyone is done with tile - 1
      // With two buffers the next tile's copy runs behind this tile's gather (into the buffer
      // tile - 1 used); with one, after it.
      if (a.nbuf == 2 && tile + 1 < tiles) stage(tile + 1);

      float acc[BT];
#pragma unroll
      for (int i = 0; i < BT; ++i) acc[i] = 0.0f;
      const HV* hv = reinterpret_cast<const HV*>(hb);
#pragma unroll
      for (int sl = 0; sl < S; ++sl) {
        float w;
        uint32_t col;
        if constexpr (BF16) {
          split_bf16_slot(wv_bits[sl], w, col);
        } else {
          w = wv[sl];
          col = sl % 2 == 0 ? column_of<0>(wc[sl / 2]) : column_of<1>(wc[sl / 2]);
        }
        Lanes<BT>::fma(w, hv[col], acc);
      }
      // The row's L lanes sum in a fixed butterfly: every lane ends with the same totals.
#pragma unroll
      for (int o = 16; o >= 1; o >>= 1) {
        if (o >= L) continue;
#pragma unroll
        for (int i = 0; i < BT; ++i) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], o);
      }

      if (epilogue) {
        const int b = tile * BT + q;
        if (b < B) {
          float out = 0.0f;
          if (t < len_s[b]) {
            float sum = acc[0];
#pragma unroll
            for (int i = 1; i < BT; ++i) sum = q == i ? acc[i] : sum;
            const float x = epx[tile * ep_vals];
            if (!bwd) {
              out = clipped_relu(x + sum, clip);
            } else {
              const float hv_t = epx[ep_h + tile * ep_vals];
              out = clipped_relu_grad(hv_t, x + sum, clip);
            }
          }
          d.y[(int64_t{t} * B + b) * d.ld_y + k] = out;
          xout[(int64_t{tile} * hpad + k) * BT + q] = out;
        }
      }
      if (a.nbuf == 1 && tile + 1 < tiles) {
        __syncthreads();  // every lane is done with this tile's state
        stage(tile + 1);
      }
    }
    if (s + 1 < T) {
      // Orders this step's exchange writes before every CTA's reads of them in step s + 1, and
      // the reads of step s (staging) before the overwrites in s + 1. The next step's epilogue
      // inputs are copied while the CTA waits.
      direction_barrier(a.arrivals + di, static_cast<unsigned int>(s + 1) * a.ctas_per_dir,
                        [&] { prefetch(s + 1); });
    }
  }
}

using KernelFn = void (*)(const Args);

template <int BT, bool BF16>
KernelFn kernel_for_slots(int slots) {
  switch (slots) {
    case 8:
      return sprnn_kernel<BT, 8, BF16>;
    case 12:
      return sprnn_kernel<BT, 12, BF16>;
    case 16:
      return sprnn_kernel<BT, 16, BF16>;
    case 20:
      return sprnn_kernel<BT, 20, BF16>;
    case 24:
      return sprnn_kernel<BT, 24, BF16>;
    case 32:
      return sprnn_kernel<BT, 32, BF16>;
    case 40:
      return sprnn_kernel<BT, 40, BF16>;
    case 48:
      return sprnn_kernel<BT, 48, BF16>;
    case 64:
      return sprnn_kernel<BT, 64, BF16>;
    case 80:
      return sprnn_kernel<BT, 80, BF16>;
    case 96:
      return sprnn_kernel<BT, 96, BF16>;
    case 128:
      return sprnn_kernel<BT, 128, BF16>;  // fp32 spills here: the plan skips it when it can
    default:
      return nullptr;
  }
}
static_assert(sizeof(kSprnnSlotCounts) / sizeof(int) == 12, "kernel_for_slots lists every count");

KernelFn kernel_for(const SprnnTiling& t) {
  const bool b = t.bf16_weights;
  switch (t.batch_tile) {
    case 1:
      return b ? kernel_for_slots<1, true>(t.slots) : kernel_for_slots<1, false>(t.slots);
    case 4:
      return b ? kernel_for_slots<4, true>(t.slots) : kernel_for_slots<4, false>(t.slots);
    default:
      return nullptr;
  }
}

void check_tiling(const SprnnTiling& t) {
  const int L = t.lanes_per_row;
  DS2_CHECK(
      t.hidden > 0 && t.hidden <= (1 << 16) && t.max_batch > 0 &&
          (t.state_buffers == 1 || t.state_buffers == 2) &&
          (t.directions == 1 || t.directions == 2) && t.rows_per_cta > 0 &&
          (L == 8 || L == 16 || L == 32) && t.threads() % 32 == 0 && t.ctas_per_direction > 0 &&
          int64_t{t.ctas_per_direction} * t.rows_per_cta >= t.hidden && kernel_for(t) != nullptr,
      "sparse persistent RNN: invalid tiling (hidden "
          << t.hidden << ", batch " << t.max_batch << ", rows/CTA " << t.rows_per_cta
          << ", lanes/row " << L << ", slots " << t.slots << ", batch tile " << t.batch_tile
          << ")");
}

}  // namespace

bool sprnn_has_kernel(const SprnnTiling& t) {
  return kernel_for(t) != nullptr;
}

size_t sprnn_shared_bytes(const SprnnTiling& t) {
  return smem_layout(t).total;
}

size_t sprnn_workspace_bytes(const SprnnTiling& t) {
  // The exchange arrays of the directions, then their two step-barrier counters.
  return size_t(t.directions) * 2 * tiles_max(t) * t.batch_tile * padded_hidden(t) * sizeof(float) +
         2 * sizeof(unsigned int);
}

int64_t sprnn_layout_words(const SprnnTiling& t) {
  return int64_t{t.ctas_per_direction} * t.slots * t.threads();
}

PrnnKernelInfo sprnn_kernel_info(const SprnnTiling& t) {
  check_tiling(t);
  return cooperative_kernel_info(reinterpret_cast<const void*>(kernel_for(t)), t.threads(),
                                 sprnn_shared_bytes(t));
}

void sprnn_launch(const SprnnTiling& t, bool backward, const PrnnDirection* dirs,
                  const int* lengths, int T, int B, float clip, void* workspace,
                  cudaStream_t stream) {
  DS2_CHECK(T >= 0 && B >= 0, "sparse persistent RNN: negative sizes T " << T << ", B " << B);
  if (T == 0 || B == 0) return;
  check_tiling(t);
  DS2_CHECK(B <= t.max_batch,
            "sparse persistent RNN: batch " << B << " exceeds the plan's maximum " << t.max_batch);
  DS2_CHECK(workspace != nullptr && lengths != nullptr,
            "sparse persistent RNN: null workspace/lengths");
  const SmemLayout layout = smem_layout(t);
  Args a{};
  a.lengths = lengths;
  a.T = T;
  a.B = B;
  a.H = t.hidden;
  a.hpad = padded_hidden(t);
  a.rows = t.rows_per_cta;
  a.ctas_per_dir = t.ctas_per_direction;
  a.lanes = t.lanes_per_row;
  a.tiles_max = tiles_max(t);
  a.nbuf = t.state_buffers;
  a.clip = clip;
  a.backward = backward ? 1 : 0;
  a.ep_off = static_cast<int>(layout.ep_off);
  a.len_off = static_cast<int>(layout.len_off);
  float* ws = static_cast<float*>(workspace);
  for (int i = 0; i < t.directions; ++i)
    a.dir[i] = prnn_device_direction("sparse persistent RNN", dirs[i], i, backward,
                                     ws + int64_t{i} * 2 * a.tiles_max * t.batch_tile * a.hpad,
                                     /*needs_layout=*/true);
  if (t.directions == 1) a.dir[1] = a.dir[0];
  a.arrivals = reinterpret_cast<unsigned int*>(ws + int64_t{t.directions} * 2 * a.tiles_max *
                                                        t.batch_tile * a.hpad);
  DS2_CUDA_CHECK(cudaMemsetAsync(a.arrivals, 0, 2 * sizeof(unsigned int), stream));

  cooperative_launch("sparse persistent RNN", reinterpret_cast<const void*>(kernel_for(t)),
                     t.directions * t.ctas_per_direction, t.threads(), &a, layout.total, stream);
}

}  // namespace ds2::kernels
