#include <cstdint>
#include <utility>

#include "core/cuda/check.h"
#include "core/error.h"
#include "kernels/async_copy.cuh"
#include "kernels/cooperative_launch.h"
#include "kernels/gru_cell.cuh"
#include "kernels/persistent_gru.h"
#include "kernels/persistent_rnn_math.cuh"
#include "kernels/step_barrier.cuh"

namespace ds2::kernels {
namespace {

constexpr int kRg = kPrnnRowGroup;
// Epilogue inputs per output: forward a_r, a_z, a_n; backward-data r, z, n, hn, dy, h_prev.
constexpr int kForwardInputs = 3, kBackwardInputs = 6;

struct GruDir {
  const float* u;
  const float* bias_h;
  float* gates;
  float* candidate;
  float* h;
  const float* dy;
  float* dpre;
  float* dgates;
  float* xbuf;  // [2 parities][max_batch][kpad]
  long long ld_gates, ld_dy, ld_dpre;
  int descending;  // steps visit t = T-1 .. 0
};

struct Args {
  GruDir dir[2];
  const int* lengths;
  int T, B, H, n, ctas_per_dir, groups, kpad, max_batch;
  // Dynamic shared memory carve-up, in bytes (weights at 0).
  int red_off, ep_off, own_off, bias_off, len_off;
  // Streamed row groups (PgruPass::streamed_groups): CTA c's at streamed + c * streamed_groups *
  // kRg * CH * threads chunks, [group * kRg + row][chunk][thread].
  int streamed_groups;
  float4* streamed;
  unsigned int* arrivals;      // per direction: CTAs arrived at the step barriers (0 at launch)
  const unsigned int* run_if;  // nullptr, or a device word: the launch does nothing while it is 0
};

int kpad_of(const PgruTiling& t, bool bwd) {
  return 4 * t.pass(bwd).chunks * t.pass(bwd).threads;
}
int max_kpad(const PgruTiling& t) {
  const int f = kpad_of(t, false), b = kpad_of(t, true);
  return f > b ? f : b;
}

struct SmemLayout {
  size_t red_off, ep_off, own_off, bias_off, len_off, total;
};

SmemLayout smem_layout(const PgruTiling& t, bool bwd) {
  const PgruPass& p = t.pass(bwd);
  const int groups = t.rows(bwd) / kRg;
  const int v = kRg * t.batch_tile;
  const int warps = p.threads / 32;
  const int outputs = t.max_batch * t.neurons_per_cta;
  SmemLayout l{};
  size_t off = size_t(groups - p.register_groups - p.streamed_groups) * kRg * p.chunks * p.threads *
               sizeof(float4);
  l.red_off = off;
  off += size_t(2) * groups * warps * v * sizeof(float);  // reduction, double-buffered per tile
  l.ep_off = off;
  off += size_t(2) * (bwd ? kBackwardInputs : kForwardInputs) * outputs * sizeof(float);
  l.own_off = off;
  off += size_t(outputs) * sizeof(float);  // h_prev (forward) or dh z of the step before
  l.bias_off = off;
  off += size_t(3) * t.neurons_per_cta * sizeof(float);
  l.len_off = off;
  off += size_t(t.max_batch) * sizeof(int);
  l.total = (off + 15) / 16 * 16;
  return l;
}

// Columns c0 .. c0 + 3 of the CTA's local row q: forward, row q of its 3n rows is U row
// (q / n) H + k0 + q % n over the H state columns; backward-data, row q is neuron j = k0 + q and
// its columns are U[i, j] over the 3H gate gradients. Zero outside U (padding rows and columns).
__device__ __forceinline__ float4 weight_chunk(const float* __restrict__ u, int H, int n, int k0,
                                               int q, int c0, bool bwd) {
  float e[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int c = c0 + i;
    e[i] = 0.0f;
    if (!bwd) {
      const int k = k0 + q % n;
      if (q < 3 * n && k < H && c < H) e[i] = u[(size_t(q / n) * H + k) * H + c];
    } else {
      const int j = k0 + q;
      if (q < n && j < H && c < 3 * H) e[i] = u[size_t(c) * H + j];
    }
  }
  return make_float4(e[0], e[1], e[2], e[3]);
}

// BT: batch rows per pass; NRG: row groups held in registers; CH: 4-column chunks per thread
// (thread tid owns input columns [4 c', 4 c' + 4) for c' = tid + c * threads); BWD: the pass;
// kStream: the CTA's last a.streamed_groups row groups read from the workspace (L2) every pass.
template <int BT, int NRG, int CH, bool BWD, bool kStream>
__global__ void pgru_kernel(const Args a) {
  constexpr int V = kRg * BT;     // partial sums per row group and batch tile
  constexpr int NRW = NRG * kRg;  // rows in registers
  constexpr int NIN = BWD ? kBackwardInputs : kForwardInputs;
  extern __shared__ __align__(16) unsigned char smem[];
  float4* wsm = reinterpret_cast<float4*>(smem);              // [(groups - NRG) * kRg][CH][threads]
  float* red = reinterpret_cast<float*>(smem + a.red_off);    // [2][groups][warps][V]
  float* ep = reinterpret_cast<float*>(smem + a.ep_off);      // [2][NIN][max_batch * n]
  float* own = reinterpret_cast<float*>(smem + a.own_off);    // [max_batch * n]
  float* bias = reinterpret_cast<float*>(smem + a.bias_off);  // [3][n]
  int* len_s = reinterpret_cast<int*>(smem + a.len_off);      // [B]
  if (a.run_if != nullptr && *a.run_if == 0u)
    return;  // every CTA alike: no barrier is left waiting

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int nt = blockDim.x, nw = nt >> 5;
  const int di = static_cast<int>(blockIdx.x) >= a.ctas_per_dir ? 1 : 0;
  const int cta = blockIdx.x - di * a.ctas_per_dir;
  const GruDir d = di ? a.dir[1] : a.dir[0];
  const int H = a.H, B = a.B, T = a.T, n = a.n, groups = a.groups, kpad = a.kpad;
  const int k0 = cta * n;  // first neuron of this CTA
  const int tiles = (B + BT - 1) / BT;
  const int outs = a.max_batch * n;  // floats per epilogue input
  const int64_t xparity = int64_t{a.max_batch} * kpad;
  // The reduction's value order in this lane (kernels/reduce_scatter_order.h): position
  // rr * BT + i of a row group's partial sums holds row rr ^ perm_row and batch row i ^ perm_b.
  const int rs_mask = reduce_scatter_mask<V>(lane);
  const int perm_row = rs_mask / BT, perm_b = rs_mask % BT;

  for (int i = tid; i < B; i += nt) len_s[i] = a.lengths[i];
  for (int i = tid; i < outs; i += nt) own[i] = 0.0f;
  if (!BWD)
    for (int i = tid; i < 3 * n; i += nt) {
      const int k = k0 + i % n;
      bias[i] = k < H ? d.bias_h[(i / n) * H + k] : 0.0f;
    }

  const int c0 = 4 * tid;
  auto slot_row = [&](int i) { return (i & ~(kRg - 1)) + ((i & (kRg - 1)) ^ perm_row); };
  float4 w[NRW > 0 ? NRW * CH : 1];  // [slot][chunk]
#pragma unroll
  for (int i = 0; i < NRW; ++i)
#pragma unroll
    for (int c = 0; c < CH; ++c)
      w[i * CH + c] = weight_chunk(d.u, H, n, k0, slot_row(i), c0 + 4 * c * nt, BWD);
  // Row groups [NRG, shared_end) in shared memory, [shared_end, groups) streamed; a thread reads
  // back only the streamed chunks it wrote itself.
  const int shared_end = kStream ? groups - a.streamed_groups : groups;
  float4* wst =
      kStream ? a.streamed + int64_t{blockIdx.x} * a.streamed_groups * kRg * CH * nt : nullptr;
  for (int i = NRW; i < shared_end * kRg; ++i)
    for (int c = 0; c < CH; ++c)
      wsm[((i - NRW) * CH + c) * nt + tid] =
          weight_chunk(d.u, H, n, k0, slot_row(i), c0 + 4 * c * nt, BWD);
  if constexpr (kStream) {
    for (int i = shared_end * kRg; i < groups * kRg; ++i)
      for (int c = 0; c < CH; ++c)
        wst[((i - shared_end * kRg) * CH + c) * nt + tid] =
            weight_chunk(d.u, H, n, k0, slot_row(i), c0 + 4 * c * nt, BWD);
  }
  __syncthreads();

  // Epilogue output o of a batch tile: batch row tile * BT + o / n, neuron k0 + o % n; the same
  // thread prefetches its inputs (cp.async, one step ahead) and finishes it, so waiting for its
  // own copies suffices. Stored at ep[parity][input][b * n + o % n].
  auto time_of = [&](int s) { return d.descending ? T - 1 - s : s; };
  auto prefetch = [&](int s) {
    const int t = time_of(s);
    float* dst = ep + (s & 1) * NIN * outs;
    for (int tile = 0; tile < tiles; ++tile)
      for (int o = tid; o < BT * n; o += nt) {
        const int b = tile * BT + o / n, kl = o % n, k = k0 + kl;
        if (b >= B || k >= H || t >= len_s[b]) continue;
        const int64_t row = int64_t{t} * B + b;
        const int e = b * n + kl;
        const float* g = d.gates + row * d.ld_gates + k;
#pragma unroll
        for (int gate = 0; gate < 3; ++gate) cp_async4(dst + gate * outs + e, g + gate * H);
        if (BWD) {
          cp_async4(dst + 3 * outs + e, d.candidate + row * H + k);
          cp_async4(dst + 4 * outs + e, d.dy + row * d.ld_dy + k);
          // h_prev: the forward's previous frame, zero before its first.
          const int tp = d.descending ? t - 1 : t + 1;
          if (tp >= 0 && tp < T)
            cp_async4(dst + 5 * outs + e, d.h + (int64_t{tp} * B + b) * H + k);
          else
            dst[5 * outs + e] = 0.0f;
        }
      }
    cp_async_commit();
  };
  if (T > 0) prefetch(0);

  int pass = 0;  // batch tiles done so far, over all steps: picks the reduction buffer
  for (int s = 0; s < T; ++s) {
    const int t = time_of(s);
    const float* xin = d.xbuf + ((s + 1) & 1) * xparity;  // the state step s - 1 wrote
    float* xout = d.xbuf + (s & 1) * xparity;
    const float* epx = ep + (s & 1) * NIN * outs;
    cp_async_wait_all();

    for (int tile = 0; tile < tiles; ++tile, ++pass) {
      // Streamed rows: the first group's loads go out before the state's.
      float4 wq[kStreamedAhead<kRg, CH>];
      if constexpr (kStream) load_streamed_unit<kRg, CH>(wst, 0, wq, tid, nt);
      // This thread's columns of batch rows tile * BT + (i ^ perm_b), zero before the first
      // step. ld.global.cg: L2, never a stale L1 line (written by other CTAs before the barrier).
      float4 hv[BT * CH];
#pragma unroll
      for (int i = 0; i < BT; ++i) {
        const int b = tile * BT + (i ^ perm_b);
#pragma unroll
        for (int c = 0; c < CH; ++c) {
          hv[c * BT + i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          if (s > 0 && b < B)
            hv[c * BT + i] =
                __ldcg(reinterpret_cast<const float4*>(xin + int64_t{b} * kpad) + tid + c * nt);
        }
      }
      // Alternating buffers: a CTA barrier lies between any two writes of the same buffer.
      float* redt = red + (pass & 1) * groups * nw * V;
      if constexpr (kStream)
        reduce_streamed_groups<kRg, BT, CH>(wst, wq, hv, shared_end, groups, redt, nw, warp, lane,
                                            rs_mask, tid, nt);
      reduce_row_groups<kRg, BT, NRG, CH>(w, wsm, hv, shared_end, redt, nw, warp, lane, rs_mask,
                                          tid, nt);
      __syncthreads();

      // Warps summed in a fixed order (deterministic), then the cell and the padding mask.
      auto row_sum = [&](int q, int bb) {
        const float* r = redt + ((q / kRg) * nw) * V + (q % kRg) * BT + bb;
        float acc = 0.0f;
#pragma unroll 8
        for (int i = 0; i < nw; ++i) acc += r[i * V];
        return acc;
      };
      for (int o = tid; o < BT * n; o += nt) {
        const int bb = o / n, kl = o % n;
        const int b = tile * BT + bb, k = k0 + kl;
        if (b >= B || k >= H) continue;
        const int e = b * n + kl;
        const int64_t row = int64_t{t} * B + b;
        const bool valid = t < len_s[b];
        if constexpr (!BWD) {
          float h = 0.0f;
          if (valid) {
            const GruGates c =
                gru_cell_forward({epx[e], epx[outs + e], epx[2 * outs + e]},
                                 {row_sum(kl, bb), row_sum(n + kl, bb), row_sum(2 * n + kl, bb)},
                                 {bias[kl], bias[n + kl], bias[2 * n + kl]}, own[e]);
            float* g = d.gates + row * d.ld_gates + k;
            g[0] = c.r;
            g[H] = c.z;
            g[2 * H] = c.n;
            d.candidate[row * H + k] = c.hn;
            h = c.h;
          }
          own[e] = h;
          d.h[row * H + k] = h;
          xout[int64_t{b} * kpad + k] = h;
        } else {
          GruGrads c{0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
          if (valid) {
            // dL/dh: from above, plus the later frame's direct path and its gates through U.
            const float dh = epx[4 * outs + e] + (own[e] + row_sum(kl, bb));
            c = gru_cell_backward(dh, epx[e], epx[outs + e], epx[2 * outs + e], epx[3 * outs + e],
                                  epx[5 * outs + e]);
          }
          store_gate_grads(c, d.dpre + row * d.ld_dpre + k, d.dgates + row * 3 * H + k, H);
          // The exchange carries the hidden-side gradients (dgates) to the next step's products.
          float* x = xout + int64_t{b} * kpad + k;
          x[0] = c.dr;
          x[H] = c.dz;
          x[2 * H] = c.dgn;
          own[e] = c.dh_prev;
        }
      }
    }
    if (s + 1 < T) {
      // Publishes this step's exchange writes to every CTA of the direction and orders this
      // step's reads before the next step's overwrites; the next step's epilogue inputs are
      // copied while the CTA waits.
      direction_barrier(a.arrivals + di, static_cast<unsigned int>(s + 1) * a.ctas_per_dir,
                        [&] { prefetch(s + 1); });
    }
  }
}

using KernelFn = void (*)(const Args);

template <int BT, int CH, bool BWD, bool kStream, int... N>
KernelFn kernel_among(int nrg, std::integer_sequence<int, N...>) {
  KernelFn fn = nullptr;
  ((fn = nrg == N ? pgru_kernel<BT, N, CH, BWD, kStream> : fn), ...);
  return fn;
}

// Instantiated: forward with 1 chunk (0..8 register groups) or 2 (0..4); backward-data, whose
// input is 3x wider, with 3 chunks (0..2 groups) or 6 (0..1), the same threads as the forward.
// A group costs 16 * CH registers, so each form holds at most 128-144 weight registers. Streamed
// rows: the widest forms only (forward 2 chunks, backward-data 6).
template <int BT>
KernelFn kernel_for_tile(const PgruPass& p, bool bwd) {
  const int nrg = p.register_groups;
  using UpTo1 = std::integer_sequence<int, 0, 1>;
  using UpTo4 = std::integer_sequence<int, 0, 1, 2, 3, 4>;
  if (p.streamed_groups > 0) {
    if (!bwd && p.chunks == 2) return kernel_among<BT, 2, false, true>(nrg, UpTo4{});
    if (bwd && p.chunks == 6) return kernel_among<BT, 6, true, true>(nrg, UpTo1{});
    return nullptr;
  }
  if (!bwd && p.chunks == 1)
    return kernel_among<BT, 1, false, false>(
        nrg, std::integer_sequence<int, 0, 1, 2, 3, 4, 5, 6, 7, 8>{});
  if (!bwd && p.chunks == 2) return kernel_among<BT, 2, false, false>(nrg, UpTo4{});
  if (bwd && p.chunks == 3)
    return kernel_among<BT, 3, true, false>(nrg, std::integer_sequence<int, 0, 1, 2>{});
  if (bwd && p.chunks == 6) return kernel_among<BT, 6, true, false>(nrg, UpTo1{});
  return nullptr;
}

KernelFn kernel_for(const PgruTiling& t, bool bwd) {
  switch (t.batch_tile) {
    case 1:
      return kernel_for_tile<1>(t.pass(bwd), bwd);
    case 2:
      return kernel_for_tile<2>(t.pass(bwd), bwd);
    case 4:
      return kernel_for_tile<4>(t.pass(bwd), bwd);
    default:
      return nullptr;
  }
}

void check_tiling(const PgruTiling& t, bool bwd) {
  const PgruPass& p = t.pass(bwd);
  const bool ok =
      t.hidden > 0 && t.max_batch > 0 && (t.directions == 1 || t.directions == 2) &&
      t.neurons_per_cta > 0 && t.neurons_per_cta % kRg == 0 && t.ctas_per_direction > 0 &&
      int64_t{t.ctas_per_direction} * t.neurons_per_cta >= t.hidden && p.threads > 0 &&
      p.threads % 32 == 0 && int64_t{p.threads} * 4 * p.chunks >= t.inputs(bwd) &&
      p.register_groups >= 0 && p.streamed_groups >= 0 &&
      p.register_groups + p.streamed_groups <= t.rows(bwd) / kRg && kernel_for(t, bwd) != nullptr;
  DS2_CHECK(ok, "persistent GRU: invalid tiling (hidden "
                    << t.hidden << ", batch " << t.max_batch << ", neurons/CTA "
                    << t.neurons_per_cta << ", " << (bwd ? "backward-data" : "forward")
                    << " threads " << p.threads << ", chunks " << p.chunks << ", register groups "
                    << p.register_groups << ", streamed groups " << p.streamed_groups << ")");
}

// Workspace bytes before the streamed rows (the exchange arrays and the barrier counters, rounded
// up to 16 bytes), and a pass's streamed rows over every CTA.
size_t streamed_offset(const PgruTiling& t) {
  return (size_t(t.directions) * 2 * t.max_batch * max_kpad(t) * sizeof(float) +
          2 * sizeof(unsigned int) + 15) /
         16 * 16;
}
size_t streamed_bytes(const PgruTiling& t, bool bwd) {
  const PgruPass& p = t.pass(bwd);
  return size_t(t.directions) * t.ctas_per_direction * p.streamed_groups * kRg * p.chunks *
         p.threads * sizeof(float4);
}

}  // namespace

bool pgru_has_kernel(const PgruTiling& t, bool backward) {
  return kernel_for(t, backward) != nullptr;
}

size_t pgru_shared_bytes(const PgruTiling& t, bool backward) {
  return smem_layout(t, backward).total;
}

size_t pgru_workspace_bytes(const PgruTiling& t) {
  const size_t f = streamed_bytes(t, false), b = streamed_bytes(t, true);
  return streamed_offset(t) + (f > b ? f : b);
}

PrnnKernelInfo pgru_kernel_info(const PgruTiling& t, bool backward) {
  check_tiling(t, backward);
  return cooperative_kernel_info(reinterpret_cast<const void*>(kernel_for(t, backward)),
                                 t.pass(backward).threads, pgru_shared_bytes(t, backward));
}

void pgru_launch(const PgruTiling& t, bool backward, const PgruDirection* dirs, const int* lengths,
                 int T, int B, void* workspace, cudaStream_t stream, const unsigned int* run_if) {
  DS2_CHECK(T >= 0 && B >= 0, "persistent GRU: negative sizes T " << T << ", B " << B);
  if (T == 0 || B == 0) return;
  check_tiling(t, backward);
  DS2_CHECK(B <= t.max_batch,
            "persistent GRU: batch " << B << " exceeds the plan's maximum " << t.max_batch);
  DS2_CHECK(lengths != nullptr && workspace != nullptr, "persistent GRU: null workspace/lengths");
  const SmemLayout layout = smem_layout(t, backward);
  const PgruPass& p = t.pass(backward);
  Args a{};
  a.lengths = lengths;
  a.T = T;
  a.B = B;
  a.H = t.hidden;
  a.n = t.neurons_per_cta;
  a.ctas_per_dir = t.ctas_per_direction;
  a.groups = t.rows(backward) / kRg;
  a.kpad = kpad_of(t, backward);
  a.max_batch = t.max_batch;
  a.red_off = static_cast<int>(layout.red_off);
  a.ep_off = static_cast<int>(layout.ep_off);
  a.own_off = static_cast<int>(layout.own_off);
  a.bias_off = static_cast<int>(layout.bias_off);
  a.len_off = static_cast<int>(layout.len_off);
  a.run_if = run_if;
  a.streamed_groups = p.streamed_groups;
  a.streamed = reinterpret_cast<float4*>(static_cast<char*>(workspace) + streamed_offset(t));
  float* ws = static_cast<float*>(workspace);
  const int64_t xfloats = int64_t{2} * t.max_batch * a.kpad;  // one direction's exchange
  for (int i = 0; i < t.directions; ++i) {
    const PgruDirection& p_i = dirs[i];
    DS2_CHECK(p_i.u && p_i.gates && p_i.candidate && p_i.h && (backward || p_i.bias_h) &&
                  (!backward || (p_i.dy && p_i.dpre && p_i.dgates)),
              "persistent GRU: null operand of direction " << i);
    GruDir& g = a.dir[i];
    g.u = p_i.u;
    g.bias_h = p_i.bias_h;
    g.gates = p_i.gates;
    g.candidate = p_i.candidate;
    g.h = p_i.h;
    g.dy = p_i.dy;
    g.dpre = p_i.dpre;
    g.dgates = p_i.dgates;
    g.ld_gates = p_i.ld_gates;
    g.ld_dy = p_i.ld_dy;
    g.ld_dpre = p_i.ld_dpre;
    g.xbuf = ws + i * xfloats;
    // The forward visits the reverse direction from T - 1 down; backward-data the opposite.
    g.descending = p_i.reverse != backward ? 1 : 0;
  }
  if (t.directions == 1) a.dir[1] = a.dir[0];
  // Zero exchange: columns past the input width are never written and multiply zero weights.
  const size_t exchange = size_t(t.directions) * xfloats * sizeof(float);
  a.arrivals = reinterpret_cast<unsigned int*>(ws + t.directions * xfloats);
  DS2_CUDA_CHECK(cudaMemsetAsync(ws, 0, exchange + 2 * sizeof(unsigned int), stream));
  cooperative_launch("persistent GRU", reinterpret_cast<const void*>(kernel_for(t, backward)),
                     t.directions * t.ctas_per_direction, p.threads, &a, layout.total, stream);
}

}  // namespace ds2::kernels
