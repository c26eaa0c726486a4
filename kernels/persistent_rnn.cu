#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/bf16.h"
#include "core/cuda/check.h"
#include "core/error.h"
#include "kernels/async_copy.cuh"
#include "kernels/clipped_relu.cuh"
#include "kernels/cooperative_launch.h"
#include "kernels/persistent_rnn.h"
#include "kernels/persistent_rnn_cluster.h"
#include "kernels/persistent_rnn_math.cuh"
#include "kernels/persistent_rnn_mma.h"
#include "kernels/persistent_rnn_operands.h"
#include "kernels/persistent_rnn_single.h"
#include "kernels/reduce_scatter_order.h"
#include "kernels/step_barrier.cuh"
#include "kernels/tagged_exchange.cuh"

namespace ds2::kernels {
namespace {

constexpr int kRg = kPrnnRowGroup;

// Exchange: [2 parities][exchange_rows][hpad] fp32. Within each batch tile, column k's values are
// stored in the row order its reader wants (reduce_scatter_store): batch row b at row b ^ (the
// reading lane's perm_b), so each load instruction of a warp reads one row.
using DirArgs = PrnnDeviceDirection<float>;

struct Args {
  DirArgs dir[2];
  const int* lengths;
  int T, B, H, hpad, rows, ctas_per_dir, groups, tiles_max, xrows;
  float clip;
  int backward;
  // Dynamic shared memory carve-up, in bytes (weights at 0).
  int red_off, ep_off, len_off;
  // Streamed row groups (PrnnTiling::streamed_groups): CTA c's at streamed + c * streamed_groups *
  // kRg * CH * threads chunks, [group * kRg + row][chunk][thread].
  int streamed_groups;
  void* streamed;
  unsigned int* arrivals;      // per direction: CTAs arrived at the step barriers (0 at launch)
  const unsigned int* run_if;  // nullptr, or a device word: the launch does nothing while it is 0
};

// Batch tiles of the plan's largest batch.
int batch_tiles(const PrnnTiling& t) {
  return (t.max_batch + t.batch_tile - 1) / t.batch_tile;
}
// Rows of the exchange array per parity: the batch rounded up to whole tiles.
int exchange_rows(const PrnnTiling& t) {
  return batch_tiles(t) * t.batch_tile;
}

struct SmemLayout {
  size_t red_off, ep_off, len_off, total;
};

SmemLayout smem_layout(const PrnnTiling& t) {
  const int groups = t.rows_per_cta / kRg;
  const int v = kRg * t.batch_tile;
  const int warps = t.threads / 32;
  const int tiles_max = batch_tiles(t);
  SmemLayout l{};
  const size_t chunk = t.bf16_weights ? sizeof(uint2) : sizeof(float4);  // 4 columns of a row
  size_t off =
      size_t(groups - t.register_groups - t.streamed_groups) * kRg * t.chunks * t.threads * chunk;
  l.red_off = off;
  off += size_t(2) * groups * warps * v * sizeof(float);  // reduction, double-buffered per tile
  l.ep_off = off;
  off += size_t(4) * tiles_max * groups * v * sizeof(float);  // epilogue inputs [parity][x|h]
  l.len_off = off;
  off += size_t(t.max_batch) * sizeof(int);
  l.total = (off + 15) / 16 * 16;
  return l;
}

// Columns c0 .. c0 + 3 of output row k: U[k, j] (forward) or U[j, k] (backward-data); zero
// outside the H x H matrix (padding rows of the last CTA, padding columns past H).
// In bf16 they are rounded to nearest even (core/bf16.h, as the CPU reference rounds).
__device__ __forceinline__ void weight_chunk(const float* __restrict__ u, int H, int k, int c0,
                                             bool transpose, float4& out) {
  float e[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int j = c0 + i;
    e[i] = 0.0f;
    if (k < H && j < H) e[i] = transpose ? u[size_t(j) * H + k] : u[size_t(k) * H + j];
  }
  out = make_float4(e[0], e[1], e[2], e[3]);
}
__device__ __forceinline__ void weight_chunk(const float* __restrict__ u, int H, int k, int c0,
                                             bool transpose, uint2& out) {
  float4 f;
  weight_chunk(u, H, k, c0, transpose, f);
  out.x = uint32_t{float_to_bf16(f.x)} | (uint32_t{float_to_bf16(f.y)} << 16);
  out.y = uint32_t{float_to_bf16(f.z)} | (uint32_t{float_to_bf16(f.w)} << 16);
}

// BT: batch rows per pass; NRG: row groups (of kRg rows) held in registers, the rest of the CTA's
// rows_per_cta rows in shared memory; BF16: weights stored (and rounded) as bf16, math in fp32.
// CH: 4-column chunks per thread; thread `tid` owns input columns [4 c', 4 c' + 4) for
// c' = tid + c * threads, c < CH, and adds its chunks' products before the reduction across the
// CTA (which costs as much per thread as the products: more chunks, fewer threads to reduce over).
// kTags: the exchange carries each value's step in its lowest bit (kernels/tagged_exchange.cuh)
// and no step barrier is needed (one chunk per thread). kOneTile: the batch is one pass (B <= BT),
// so no registers hold the next pass's state while this one computes (BT * CH float4: at BT 4,
// CH 2 as many registers as one more row group of fp32 weights). kStream: the CTA's last
// a.streamed_groups row groups are read from the workspace (L2) every step, each a group ahead
// of its products and the first while the state is awaited; a template flag because the
// look-ahead's registers would otherwise cost every kernel a row group.
template <int BT, int NRG, bool BF16, bool kTags, int CH, bool kOneTile, bool kStream>
__global__ void prnn_kernel(const Args a) {
  static_assert(CH == 1 || !kTags, "the tagged exchange: one chunk per thread");
  static_assert(!kStream || !kTags, "streamed rows: with the step barrier");
  using Chunk = typename std::conditional<BF16, uint2, float4>::type;
  constexpr int V = kRg * BT;     // partial sums per row group and batch tile
  constexpr int NRW = NRG * kRg;  // rows in registers
  extern __shared__ __align__(16) unsigned char smem[];
  Chunk* wsm = reinterpret_cast<Chunk*>(smem);              // [(groups - NRG) * kRg][CH][threads]
  float* red = reinterpret_cast<float*>(smem + a.red_off);  // [2][groups][warps][V]
  float* ep = reinterpret_cast<float*>(smem + a.ep_off);    // [2][x | h][tiles_max][groups * V]
  int* len_s = reinterpret_cast<int*>(smem + a.len_off);    // [B]
  if (a.run_if != nullptr && *a.run_if == 0u)
    return;  // every CTA alike: no barrier is left waiting

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int nt = blockDim.x, nw = nt >> 5;
  const int di = static_cast<int>(blockIdx.x) >= a.ctas_per_dir ? 1 : 0;
  const int cta = blockIdx.x - di * a.ctas_per_dir;
  const DirArgs d = di ? a.dir[1] : a.dir[0];
  const int H = a.H, B = a.B, T = a.T, groups = a.groups, hpad = a.hpad;
  const int r0 = cta * a.rows;  // first output neuron of this CTA
  const int tiles = kOneTile ? 1 : (B + BT - 1) / BT;
  const int vals = groups * V;  // outputs of one batch tile
  const bool bwd = a.backward != 0;
  const float clip = a.clip;
  const int ep_parity = 2 * a.tiles_max * vals;  // floats per parity of `ep`
  const int ep_h = a.tiles_max * vals;           // offset of the h inputs within a parity
  const int64_t xbuf_parity = int64_t{a.xrows} * hpad;
  // The reduction's order of values in this lane (reduce_scatter_store): position rr * BT + b of
  // a row group's partial sums holds row rr ^ perm_row and batch row b ^ perm_b, so the weights
  // are loaded in that order, and the state's writers store it so (exchange row b of a tile holds
  // batch row b ^ perm_b of this thread's columns).
  const int rs_mask = reduce_scatter_mask<V>(lane);
  const int perm_row = rs_mask / BT, perm_b = rs_mask % BT;

  for (int i = tid; i < B; i += nt) len_s[i] = a.lengths[i];
  if (!kTags && cta == 0) {
    // Columns H .. hpad of the exchange array are never written by a step: zero them once (read
    // from step 1 on, after a step barrier), so padded columns multiply zero weights by zero.
    const int padw = hpad - H;
    for (int i = tid; i < 2 * a.xrows * padw; i += nt) {
      const int row = i / padw;
      d.xbuf[int64_t{row} * hpad + H + i % padw] = 0.0f;
    }
  }

  const int c0 = 4 * tid;
  // Tagged: this thread's columns below H (bit i: column c0 + i). Columns past H are never written
  // (nor tagged); they are not read but set to zero, which their zero weights need.
  const uint32_t cols = c0 >= H ? 0u : H - c0 >= 4 ? 0xfu : (1u << (H - c0)) - 1u;
  // Slot i of the CTA's rows holds row i ^ perm_row within its group (as the reduction wants).
  auto slot_row = [&](int i) { return r0 + (i & ~(kRg - 1)) + ((i & (kRg - 1)) ^ perm_row); };
  Chunk w[NRW > 0 ? NRW * CH : 1];  // [slot][chunk]
#pragma unroll
  for (int i = 0; i < NRW; ++i)
#pragma unroll
    for (int c = 0; c < CH; ++c)
      weight_chunk(d.u, H, slot_row(i), c0 + 4 * c * nt, bwd, w[i * CH + c]);
  // Row groups [NRG, shared_end) in shared memory, [shared_end, groups) streamed. A thread reads
  // back only the streamed chunks it wrote itself, so program order is all they need.
  const int shared_end = kStream ? groups - a.streamed_groups : groups;
  Chunk* wst = kStream ? reinterpret_cast<Chunk*>(a.streamed) +
                             int64_t{blockIdx.x} * a.streamed_groups * kRg * CH * nt
                       : nullptr;
  for (int i = NRW; i < shared_end * kRg; ++i)
    for (int c = 0; c < CH; ++c)
      weight_chunk(d.u, H, slot_row(i), c0 + 4 * c * nt, bwd, wsm[((i - NRW) * CH + c) * nt + tid]);
  if constexpr (kStream) {
    for (int i = shared_end * kRg; i < groups * kRg; ++i)
      for (int c = 0; c < CH; ++c)
        weight_chunk(d.u, H, slot_row(i), c0 + 4 * c * nt, bwd,
                     wst[((i - shared_end * kRg) * CH + c) * nt + tid]);
  }
  __syncthreads();

  // Output o of a batch tile: row group g = o / V, value v = o % V = rr * BT + bb.
  // Epilogue inputs (x, and h for backward-data) of step s are copied into ep[s & 1] by the
  // thread that uses them, asynchronously, one step ahead (they do not depend on the recurrence).
  auto prefetch = [&](int s) {
    const int t = d.descending ? T - 1 - s : s;
    float* dst = ep + (s & 1) * ep_parity;
    for (int o = tid; o < vals; o += nt) {
      const int v = o % V;
      const int k = r0 + (o / V) * kRg + v / BT;
      if (k >= H) continue;
      for (int tile = 0; tile < tiles; ++tile) {
        const int b = tile * BT + v % BT;
        if (b >= B || t >= len_s[b]) continue;
        const int64_t row = int64_t{t} * B + b;
        cp_async4(dst + tile * vals + o, d.x + row * d.ld_x + k);
        if (bwd) cp_async4(dst + ep_h + tile * vals + o, d.h + row * d.ld_h + k);
      }
    }
    cp_async_commit();
  };
  if (T > 0) prefetch(0);

  int pass = 0;  // batch tiles done so far, over all steps: picks the reduction buffer
  for (int s = 0; s < T; ++s) {
    const int t = d.descending ? T - 1 - s : s;
    const float* xin = d.xbuf + ((s + 1) & 1) * xbuf_parity;  // the state step s - 1 wrote
    float* xout = d.xbuf + (s & 1) * xbuf_parity;
    const float* epx = ep + (s & 1) * ep_parity;
    cp_async_wait_all();

    // State of batch rows tile * BT .. + BT, this thread's columns (chunk c of exchange row
    // tile * BT + i, batch row tile * BT + (i ^ perm_b), at hv[c * BT + i]); zero before the
    // first step.
    // ld.global.cg: L2, never a stale L1 line (other CTAs wrote it before the step barrier).
    // Tagged: relaxed loads, then await_state re-reads late pieces, all of them in each round.
    auto state_at = [&](int tile, int i, int c = 0) {
      return reinterpret_cast<const float4*>(xin + int64_t{tile * BT + i} * hpad) + tid + c * nt;
    };
    auto load_state = [&](float4(&hv)[BT * CH], int tile) {
#pragma unroll
      for (int i = 0; i < BT; ++i) {
        const int b = tile * BT + (i ^ perm_b);
#pragma unroll
        for (int c = 0; c < CH; ++c) {
          hv[c * BT + i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          if (s > 0 && b < B && (!kTags || cols != 0))
            hv[c * BT + i] =
                kTags ? load_tagged(state_at(tile, i, c)) : __ldcg(state_at(tile, i, c));
        }
      }
    };
    auto await_state = [&](float4(&hv)[BT * CH], int tile) {
      if (!kTags || s == 0 || cols == 0) return;
      const uint32_t tag = fp32_step_tag(s - 1);
      unsigned int late = 0;
#pragma unroll
      for (int i = 0; i < BT; ++i)
        if (tile * BT + (i ^ perm_b) < B && !tags_are(hv[i], tag, cols)) late |= 1u << i;
      while (late != 0) {
#pragma unroll
        for (int i = 0; i < BT; ++i)
          if (late >> i & 1u) hv[i] = load_tagged(state_at(tile, i));
#pragma unroll
        for (int i = 0; i < BT; ++i)
          if ((late >> i & 1u) && tags_are(hv[i], tag, cols)) late &= ~(1u << i);
      }
      if (cols != 0xfu) {
#pragma unroll
        for (int i = 0; i < BT; ++i) {
          if (!(cols & 2u)) hv[i].y = 0.0f;
          if (!(cols & 4u)) hv[i].z = 0.0f;
          if (!(cols & 8u)) hv[i].w = 0.0f;
        }
      }
    };
    float4 hcur[BT * CH], hnext[kOneTile ? 1 : BT * CH];
    load_state(hcur, 0);
    for (int tile = 0; tile < tiles; ++tile, ++pass) {
      if constexpr (!kOneTile) {
        if (tile + 1 < tiles) load_state(hnext, tile + 1);
      }
      // Streamed rows: the first group's loads go out while the state is on its way.
      Chunk wq[kStreamedAhead<kRg, CH>];
      if constexpr (kStream) load_streamed_unit<kRg, CH>(wst, 0, wq, tid, nt);
      await_state(hcur, tile);
      // Alternating buffers: a CTA barrier lies between any two writes of the same buffer, so
      // a slow thread's epilogue reads finish before the next overwrite.
      float* redt = red + (pass & 1) * groups * nw * V;
      if constexpr (kStream)
        reduce_streamed_groups<kRg, BT, CH>(wst, wq, hcur, shared_end, groups, redt, nw, warp, lane,
                                            rs_mask, tid, nt);
#pragma unroll
      for (int g = 0; g < NRG; ++g) {
        float acc[V];
#pragma unroll
        for (int rr = 0; rr < kRg; ++rr)
#pragma unroll
          for (int b = 0; b < BT; ++b) {
            const Chunk* wr = &w[(g * kRg + rr) * CH];
            acc[rr * BT + b] = dot4(wr[0], hcur[b]);
#pragma unroll
            for (int c = 1; c < CH; ++c)
              acc[rr * BT + b] = dot4_add(wr[c], hcur[c * BT + b], acc[rr * BT + b]);
          }
        reduce_scatter_store<V>(acc, redt + (g * nw + warp) * V, lane, rs_mask);
      }
      for (int g = NRG; g < shared_end; ++g) {
        Chunk ws[kRg * CH];
#pragma unroll
        for (int i = 0; i < kRg * CH; ++i) ws[i] = wsm[((g - NRG) * kRg * CH + i) * nt + tid];
        float acc[V];
#pragma unroll
        for (int rr = 0; rr < kRg; ++rr)
#pragma unroll
          for (int b = 0; b < BT; ++b) {
            acc[rr * BT + b] = dot4(ws[rr * CH], hcur[b]);
#pragma unroll
            for (int c = 1; c < CH; ++c)
              acc[rr * BT + b] = dot4_add(ws[rr * CH + c], hcur[c * BT + b], acc[rr * BT + b]);
          }
        reduce_scatter_store<V>(acc, redt + (g * nw + warp) * V, lane, rs_mask);
      }
      __syncthreads();

      // Warps summed in a fixed order, then the cell: clipped ReLU (forward) or its derivative
      // (backward-data), and the padding mask.
      for (int o = tid; o < vals; o += nt) {
        const int g = o / V, v = o % V;
        const int k = r0 + g * kRg + v / BT, b = tile * BT + v % BT;
        if (k >= H || b >= B) continue;
        float out = 0.0f;
        if (t < len_s[b]) {
          const float* r = redt + g * nw * V + v;
          float acc = 0.0f;
#pragma unroll 8
          for (int i = 0; i < nw; ++i) acc += r[i * V];  // loads in flight together
          const float x = epx[tile * vals + o];
          if (!bwd) {
            out = clipped_relu(x + acc, clip);
          } else {
            const float hv = epx[ep_h + tile * vals + o];
            out = clipped_relu_grad(hv, x + acc, clip);
          }
        }
        d.y[(int64_t{t} * B + b) * d.ld_y + k] = out;
        const int xrow = prnn_exchange_row<V, BT>(b, k);
        if constexpr (kTags)
          store_tagged(xout + int64_t{xrow} * hpad + k, out, fp32_step_tag(s));
        else
          xout[int64_t{xrow} * hpad + k] = out;
      }
      if constexpr (!kOneTile) {
#pragma unroll
        for (int i = 0; i < BT * CH; ++i) hcur[i] = hnext[i];
      }
    }
    if (s + 1 < T) {
      // Publishes this step's exchange writes to step s + 1's readers in every CTA of the
      // direction (tags: they wait for the values), and orders the reads of step s before the
      // overwrites in s + 1. The next step's epilogue inputs (their buffer was last read in step
      // s - 1) are copied while the CTA waits.
      end_step<kTags>(a.arrivals + di, static_cast<unsigned int>(s + 1) * a.ctas_per_dir,
                      [&] { prefetch(s + 1); });
    }
  }
}

using KernelFn = void (*)(const Args);

// The instantiation among register groups N... whose count is nrg (nullptr: none).
template <int BT, bool BF16, bool kTags, int CH, bool kOneTile, bool kStream, int... N>
KernelFn kernel_among(int nrg, std::integer_sequence<int, N...>) {
  KernelFn fn = nullptr;
  ((fn = nrg == N ? prnn_kernel<BT, N, BF16, kTags, CH, kOneTile, kStream> : fn), ...);
  return fn;
}

// Register groups instantiated: 0..8 with one chunk per thread, and for half-width weights also
// 10..16 in steps of two (twice the rows in the same registers). With two chunks a group takes
// twice the registers: 0..4 fp32 groups, 0..8 bf16; fp32 also 5 where the batch is one pass
// (kOneTile: the next pass's state needs no registers).
template <int BT, bool BF16, bool kTags, int CH, bool kOneTile, bool kStream = false>
KernelFn kernel_for_groups(int nrg) {
  using UpTo4 = std::integer_sequence<int, 0, 1, 2, 3, 4>;
  using UpTo5 = std::integer_sequence<int, 0, 1, 2, 3, 4, 5>;
  using UpTo8 = std::integer_sequence<int, 0, 1, 2, 3, 4, 5, 6, 7, 8>;
  using UpTo16 = std::integer_sequence<int, 0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16>;
  if constexpr (CH == 2 && !BF16 && kOneTile)
    return kernel_among<BT, BF16, kTags, CH, kOneTile, kStream>(nrg, UpTo5{});
  else if constexpr (CH == 2 && !BF16)
    return kernel_among<BT, BF16, kTags, CH, kOneTile, kStream>(nrg, UpTo4{});
  else if constexpr (CH == 2 || !BF16)
    return kernel_among<BT, BF16, kTags, CH, kOneTile, kStream>(nrg, UpTo8{});
  else
    return kernel_among<BT, BF16, kTags, CH, kOneTile, kStream>(nrg, UpTo16{});
}
static_assert(kPrnnMaxRegisterGroups == 8 && kPrnnMaxRegisterGroupsBf16 == 16,
              "kernel_for_groups instantiates up to 8 fp32 groups and up to 16 bf16 ones");

// The tagged exchange only where the plan takes it, fp32 weights at batch tile 1: elsewhere it
// measured slower than the barrier (kernels/NOTES.md, version 5), so it is not instantiated.
// Two chunks per thread: with the step barrier, and for fp32 weights at batches of 3-4 with rows in
// shared memory a one-pass kernel, which has registers for a fifth row group. H100, forward us a
// step against the general kernel (kernels/NOTES.md, session 31): H 2304 3.69-3.73 -> 3.51-3.53, H
// 2560 3.79-3.80 -> 3.67-3.68, H 2304 batch 3 3.79-3.87 -> 3.63; with every row in registers (H
// 1920, 2048) it was 0.01-0.08 slower, so those keep the general kernel. bf16 gains no group that
// does not spill; batch tiles 1 and 2 keep the general form.
// Streamed row groups: two chunks and the step barrier only (the layers past what a CTA holds on
// chip, where two chunks hold the most rows in registers).
template <int BT, bool kStream>
KernelFn two_chunk_kernel(const PrnnTiling& t) {
  const int nrg = t.register_groups;
  if constexpr (BT == 4) {
    if (t.max_batch <= BT && !t.bf16_weights && nrg < t.rows_per_cta / kRg)
      return kernel_for_groups<BT, false, false, 2, true, kStream>(nrg);
  }
  return t.bf16_weights ? kernel_for_groups<BT, true, false, 2, false, kStream>(nrg)
                        : kernel_for_groups<BT, false, false, 2, false, kStream>(nrg);
}

template <int BT>
KernelFn kernel_for_precision(const PrnnTiling& t) {
  const int nrg = t.register_groups;
  if (t.chunks == 2) {
    if (t.tagged_exchange) return nullptr;
    return t.streamed_groups > 0 ? two_chunk_kernel<BT, true>(t) : two_chunk_kernel<BT, false>(t);
  }
  if (t.chunks != 1 || t.streamed_groups > 0) return nullptr;
  if (!t.tagged_exchange)
    return t.bf16_weights ? kernel_for_groups<BT, true, false, 1, false>(nrg)
                          : kernel_for_groups<BT, false, false, 1, false>(nrg);
  if constexpr (BT == 1) {
    if (!t.bf16_weights) return kernel_for_groups<1, false, true, 1, false>(nrg);
  }
  return nullptr;
}

KernelFn kernel_for(const PrnnTiling& t) {
  switch (t.batch_tile) {
    case 1:
      return kernel_for_precision<1>(t);
    case 2:
      return kernel_for_precision<2>(t);
    case 4:
      return kernel_for_precision<4>(t);
    default:
      return nullptr;
  }
}

// The kernel t selects: the fp32-math kernel or the tensor-core one.
const void* kernel_ptr(const PrnnTiling& t) {
  if (t.single_cta) return prnn_single_kernel(t);
  if (t.cluster) return prnn_cluster_kernel(t);
  return t.tensor_cores ? prnn_mma_kernel(t) : reinterpret_cast<const void*>(kernel_for(t));
}

void check_tiling(const PrnnTiling& t) {
  const bool common =
      t.hidden > 0 && t.max_batch > 0 && (t.directions == 1 || t.directions == 2) &&
      t.rows_per_cta > 0 && t.ctas_per_direction > 0 &&
      int64_t{t.ctas_per_direction} * t.rows_per_cta >= t.hidden &&
      kernel_ptr(t) != nullptr;  // also the fp32 split's rules: tagged, 4 rows a set
  // Batch groups: grid-wide tensor-core plans, bf16 or the fp32 split (clipped ReLU or GRU).
  const bool groups_ok = t.batch_groups == 1 || (t.batch_groups >= 2 && t.sets() <= t.max_sets() &&
                                                 t.tensor_cores && !t.cluster);
  // Tagged tensor-core kernels: every state element of the padded k-tiles has an owner (a row;
  // in the GRU a neuron: the forward's CTA holds its three gates' rows).
  const int owners = t.gru ? pgru_mma_neurons(t) : t.rows_per_cta;
  const bool covered = !t.tensor_cores || !t.tagged_exchange || t.cluster ||
                       int64_t{t.ctas_per_direction} * owners >= prnn_mma_state_owners(t);
  const bool own = t.single_cta ? true  // prnn_single_kernel checked the rest
                   : t.tensor_cores
                       ? t.threads == kPrnnMmaThreads &&
                             t.rows_per_cta % prnn_mma_tile_rows(t) == 0 &&
                             // one pass: one n-tile, or the GRU's set of 8, 16 or 32 rows
                             (!t.tagged_exchange || t.group_batch() <= (t.gru ? t.batch_tile : 8))
                       : t.rows_per_cta % kRg == 0 && t.threads % 32 == 0 &&
                             int64_t{t.threads} * 4 * t.chunks >= t.hidden &&
                             t.threads >= (t.rows_per_cta / kRg) * kRg * t.batch_tile &&
                             t.register_groups >= 0 && t.streamed_groups >= 0 &&
                             t.register_groups + t.streamed_groups <= t.rows_per_cta / kRg;
  const bool streamed_ok = t.streamed_groups == 0 || (!t.tensor_cores && !t.cluster);
  DS2_CHECK(common && groups_ok && own && covered && streamed_ok,
            "persistent RNN: invalid tiling (hidden "
                << t.hidden << ", batch " << t.max_batch << ", rows/CTA " << t.rows_per_cta
                << ", threads " << t.threads << ", register groups " << t.register_groups
                << ", batch groups " << t.batch_groups << ", streamed groups " << t.streamed_groups
                << (t.tensor_cores ? ", tensor cores" : "") << ")"
                << (covered ? ""
                            : ": its CTAs leave state elements of the padded k-tiles without an "
                              "owner, and the tagged exchange would wait for them forever"));
}

// Workspace bytes before the streamed rows (the exchange arrays and the barrier counters, rounded
// up to 16 bytes for the rows' 8- and 16-byte chunks), and the streamed rows of every CTA.
size_t streamed_offset(const PrnnTiling& t) {
  const size_t exchange =
      size_t(t.directions) * 2 * exchange_rows(t) * prnn_padded_hidden(t) * sizeof(float);
  return (exchange + 2 * sizeof(unsigned int) + 15) / 16 * 16;
}
size_t streamed_bytes(const PrnnTiling& t) {
  const size_t chunk = t.bf16_weights ? sizeof(uint2) : sizeof(float4);
  return size_t(t.ctas()) * t.streamed_groups * kRg * t.chunks * t.threads * chunk;
}

}  // namespace

bool prnn_has_kernel(const PrnnTiling& t) {
  return kernel_ptr(t) != nullptr;
}

int prnn_padded_hidden(const PrnnTiling& t) {
  return 4 * t.chunks * t.threads;
}

size_t prnn_shared_bytes(const PrnnTiling& t) {
  if (t.single_cta) return prnn_single_shared_bytes(t);
  if (t.cluster) return prnn_cluster_shared_bytes(t);
  return t.tensor_cores ? prnn_mma_shared_bytes(t) : smem_layout(t).total;
}

size_t prnn_workspace_bytes(const PrnnTiling& t) {
  if (t.cluster || t.single_cta) return 0;  // the exchange lives in shared memory
  if (t.tensor_cores) return prnn_mma_workspace_bytes(t);
  // The exchange arrays of the directions, their two barrier counters, then the streamed rows.
  return streamed_offset(t) + streamed_bytes(t);
}

PrnnKernelInfo prnn_kernel_info(const PrnnTiling& t) {
  check_tiling(t);
  PrnnKernelInfo info = cooperative_kernel_info(kernel_ptr(t), t.threads, prnn_shared_bytes(t));
  // Clusters only where a CTA can run at all (a plan refuses the rest before reading this).
  if (t.cluster && info.blocks_per_sm > 0) info.max_clusters = prnn_cluster_max_active(t);
  if (t.single_cta && t.ctas_per_direction > 1 && info.blocks_per_sm > 0)
    info.max_clusters = prnn_single_max_clusters(t);
  return info;
}

bool prnn_launch_checks(const PrnnTiling& t, int T, int B, const int* lengths,
                        const void* workspace) {
  DS2_CHECK(T >= 0 && B >= 0, "persistent RNN: negative sizes T " << T << ", B " << B);
  if (T == 0 || B == 0) return false;
  check_tiling(t);
  DS2_CHECK(B <= t.max_batch,
            "persistent RNN: batch " << B << " exceeds the plan's maximum " << t.max_batch);
  DS2_CHECK(lengths != nullptr && (workspace != nullptr || prnn_workspace_bytes(t) == 0),
            "persistent RNN: null workspace/lengths");
  return true;
}

void prnn_launch(const PrnnTiling& t, bool backward, const PrnnDirection* dirs, const int* lengths,
                 int T, int B, float clip, void* workspace, cudaStream_t stream,
                 const unsigned int* run_if) {
  if (!prnn_launch_checks(t, T, B, lengths, workspace)) return;
  DS2_CHECK(run_if == nullptr || (!t.cluster && !t.tensor_cores && !t.single_cta),
            "persistent RNN: a conditional launch (run_if) runs the fp32-math kernel only");
  if (t.single_cta) {
    prnn_single_launch(t, backward, dirs, lengths, T, B, clip, stream);
    return;
  }
  if (t.cluster) {
    prnn_cluster_launch(t, backward, dirs, lengths, T, B, clip, stream);
    return;
  }
  if (t.tensor_cores) {
    prnn_mma_launch(t, backward, dirs, lengths, T, B, clip, workspace, stream);
    return;
  }
  const SmemLayout layout = smem_layout(t);
  Args a{};
  a.lengths = lengths;
  a.T = T;
  a.B = B;
  a.H = t.hidden;
  a.hpad = prnn_padded_hidden(t);
  a.rows = t.rows_per_cta;
  a.ctas_per_dir = t.ctas_per_direction;
  a.groups = t.rows_per_cta / kRg;
  a.tiles_max = batch_tiles(t);
  a.xrows = exchange_rows(t);
  a.clip = clip;
  a.backward = backward ? 1 : 0;
  a.run_if = run_if;
  a.red_off = static_cast<int>(layout.red_off);
  a.ep_off = static_cast<int>(layout.ep_off);
  a.len_off = static_cast<int>(layout.len_off);
  a.streamed_groups = t.streamed_groups;
  a.streamed = static_cast<unsigned char*>(workspace) + streamed_offset(t);
  float* ws = static_cast<float*>(workspace);
  for (int i = 0; i < t.directions; ++i)
    a.dir[i] = prnn_device_direction("persistent RNN", dirs[i], i, backward,
                                     ws + int64_t{i} * 2 * a.xrows * a.hpad);
  if (t.directions == 1) a.dir[1] = a.dir[0];
  a.arrivals = reinterpret_cast<unsigned int*>(ws + int64_t{t.directions} * 2 * a.xrows * a.hpad);
  if (t.tagged_exchange) {
    // Tag bit 1 everywhere, which no word of this launch's first two steps carries.
    const size_t exchange = size_t(t.directions) * 2 * a.xrows * a.hpad * sizeof(float);
    DS2_CUDA_CHECK(cudaMemsetAsync(ws, kTaggedFp32FillByte, exchange, stream));
  } else {
    DS2_CUDA_CHECK(cudaMemsetAsync(a.arrivals, 0, 2 * sizeof(unsigned int), stream));
  }

  cooperative_launch("persistent RNN", reinterpret_cast<const void*>(kernel_for(t)), t.ctas(),
                     t.threads, &a, layout.total, stream);
}

}  // namespace ds2::kernels
