#include <algorithm>
#include <cstdint>

#include "core/cuda/check.h"
#include "core/error.h"
#include "kernels/async_copy.cuh"
#include "kernels/cluster_launch.h"
#include "kernels/cluster_sync.cuh"
#include "kernels/cooperative_launch.h"
#include "kernels/gru_cell.cuh"
#include "kernels/lane_group_sums.cuh"
#include "kernels/persistent_gru_single.h"
#include "kernels/single_cta_steps.cuh"

namespace ds2::kernels {
namespace {

// Lanes that share a neuron's rows, each summing a slice of the columns.
constexpr int kLanesPerNeuron = 8;
// Steps a chunk of the staged inputs and outputs holds (32 batch rows' worth).
template <int BT>
constexpr int kChunk = 32 / BT;
// Staged planes: the inputs a_r, a_z, a_n; the outputs r, z, n, hn (the candidate) and h.
constexpr int kInputPlanes = 3, kOutputPlanes = 5;

struct SingleGruDir {
  const float* u;
  const float* bias_h;
  float* gates;
  float* candidate;
  float* h;
  long long ld_gates;
  int descending;  // steps visit t = T-1 .. 0
};

struct SingleGruArgs {
  SingleGruDir dir[2];
  const int* lengths;
  int T, B, H;
  int neurons_per_cta;  // a cluster's CTA c owns neurons [c NC, (c + 1) NC)
};

// Float4 column groups a lane: lane q of a group reads columns 4 (q + 8 m) + e, m < G.
int column_groups(int hidden) {
  return std::max(1, (hidden + 4 * kLanesPerNeuron - 1) / (4 * kLanesPerNeuron));
}

// Threads a CTA of N at most: 8 a neuron of its ceil(32 G / N) (H <= 32 G).
template <int G, int N>
constexpr int threads_max() {
  constexpr int t = (32 * G + N - 1) / N * kLanesPerNeuron;
  return t > 1024 ? 1024 : (t + 31) / 32 * 32;
}

// G: float4 column groups a lane; BT: batch rows a launch; N: CTAs a direction (a cluster when
// N > 1). CTA c owns neurons [c NC, (c + 1) NC); its thread t holds U's rows g H + j, g = r, z, n,
// of neuron j = c NC + t / 8 at columns 4 (q + 8 m) + e, q = t % 8. A step reads the whole state
// as float4s, each value feeding 3 rows, and sums 3 BT values over 8 lanes: first halving over
// the batch rows, then adding whole, so that every lane ends with one batch row's r, z, n (lanes
// 0-3 of a group batch row 0, 4-7 row 1 at BT 2; lanes 2 b and 2 b + 1 row b at BT 4) and the
// first lane of each row writes.
template <int G, int BT, int N>
__global__ void __launch_bounds__(threads_max<G, N>(), 1)
    pgru_single_kernel_t(const SingleGruArgs a) {
  constexpr int Q = kLanesPerNeuron, HP = 4 * G * Q;  // HP: the state's padded row
  constexpr int V = 3 * BT;                           // values a thread sums a step
  constexpr int NA = BT == 1 ? 2 : 1;                 // accumulators a value, for ILP
  extern __shared__ __align__(16) float state[];      // [2 buffers][BT][HP], then the chunks
  const SingleGruDir d = blockIdx.x / N ? a.dir[1] : a.dir[0];
  const int H = a.H, lane = threadIdx.x & 31;
  const int rank = N > 1 ? static_cast<int>(cluster_rank()) : 0;
  const int nc = a.neurons_per_cta;
  const int begin = rank * nc, end = min(H, begin + nc);
  // The neurons this CTA stages: none in a cluster's last CTAs where N does not divide H finely
  // enough (H 33 on 8 CTAs of 5); such a CTA still keeps the cluster's steps.
  const int own = max(0, end - begin);
  const int j = begin + threadIdx.x / Q, q = threadIdx.x % Q;
  float w[3][G][4];
#pragma unroll
  for (int g = 0; g < 3; ++g)
#pragma unroll
    for (int m = 0; m < G; ++m)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = 4 * (q + Q * m) + e;
        w[g][m][e] = j < end && c < H ? d.u[(int64_t{g} * H + j) * H + c] : 0.0f;
      }
  GruTriple bias{0.0f, 0.0f, 0.0f};
  if (j < end) bias = {d.bias_h[j], d.bias_h[H + j], d.bias_h[2 * H + j]};
  for (int i = threadIdx.x; i < 2 * BT * HP; i += blockDim.x) state[i] = 0.0f;

  // The batch row whose r, z, n this lane ends with; len -1: not this lane's to write.
  const int mine = first_group_value<BT, Q>(lane);
  const bool writer = (lane & (Q / BT - 1)) == 0;
  const int T = a.T, B = a.B;
  const int len = writer && mine < B && j < end ? a.lengths[mine] : -1;
  const int out = mine * HP + j;               // the value's place in the state
  const int at = mine * nc + threadIdx.x / Q;  // in a staged step ([BT][NC])
  // The inputs a_r, a_z, a_n and the outputs move between global and shared memory kChunk steps
  // at a time, by every thread: the next chunk's inputs are copied (cp.async) while this one runs,
  // the last chunk's outputs stored while this one runs, so a step touches shared memory only.
  constexpr int C = kChunk<BT>;
  const int plane = C * BT * nc;                           // floats a plane of a chunk
  float* in_stage = state + 2 * BT * HP;                   // [2 chunks][3 planes][C][BT][NC]
  float* out_stage = in_stage + 2 * kInputPlanes * plane;  // [2 chunks][5 planes][C][BT][NC]
  // N > 1, after the chunks: each state buffer's mbarrier (an even float offset: 8-byte aligned).
  uint64_t* arrived = reinterpret_cast<uint64_t*>(out_stage + 2 * kOutputPlanes * plane);
  // Every batch row's length, for the chunk stores (which walk the rows by a run-time index). Not
  // static shared memory: the launch raises the dynamic limit to the whole of the opt-in.
  int* row_len = reinterpret_cast<int*>(arrived + (N > 1 ? 2 : 0));
  if (threadIdx.x < BT) row_len[threadIdx.x] = threadIdx.x < B ? a.lengths[threadIdx.x] : 0;
  auto step_time = [&](int s) { return d.descending ? T - 1 - s : s; };
  // N > 1: a buffer's phase waits for the other CTAs' neurons.
  ClusterStateExchange<N> exchange{arrived, static_cast<uint32_t>((H - own) * B * sizeof(float)),
                                   rank};
  exchange.start();
  const ChunkWalk walk(threadIdx.x, blockDim.x, B, max(own, 1));
  auto chunk_inputs = [&](int k) {
    const int steps = own > 0 ? min(C, T - k * C) : 0;
    float* xs = in_stage + (k & 1) * kInputPlanes * plane;
    for (ChunkWalk e = walk; e.i < steps; e.next(B, own)) {
      const int64_t row = int64_t{step_time(k * C + e.i)} * B + e.b;
      const int to = (e.i * BT + e.b) * nc + e.r;
      const float* from = d.gates + row * d.ld_gates + begin + e.r;
      cp_async4(xs + to, from);
      cp_async4(xs + plane + to, from + H);
      cp_async4(xs + 2 * plane + to, from + 2 * H);
    }
    cp_async_commit();
  };
  auto chunk_outputs = [&](int k) {
    const int steps = own > 0 ? min(C, T - k * C) : 0;
    const float* ys = out_stage + (k & 1) * kOutputPlanes * plane;
    for (ChunkWalk e = walk; e.i < steps; e.next(B, own)) {
      const int t = step_time(k * C + e.i);
      const int64_t row = int64_t{t} * B + e.b;
      const int from = (e.i * BT + e.b) * nc + e.r, col = begin + e.r;
      d.h[row * H + col] = ys[4 * plane + from];
      if (t < row_len[e.b]) {  // padded frames keep their gates and candidate
        float* g = d.gates + row * d.ld_gates + col;
        g[0] = ys[from];
        g[H] = ys[plane + from];
        g[2 * H] = ys[2 * plane + from];
        d.candidate[row * H + col] = ys[3 * plane + from];
      }
    }
  };
  run_chunked_steps<C>(T, exchange, chunk_inputs, chunk_outputs, [&](int s, int k, int i) {
    const float* cur = state + (s & 1) * BT * HP;
    float* nxt = state + ((s & 1) ^ 1) * BT * HP;
    // The cell's inputs first, so that their loads overlap the products.
    const int staged_in = (k & 1) * kInputPlanes * plane + i * BT * nc + at;
    GruTriple x{0.0f, 0.0f, 0.0f};
    float h_prev = 0.0f;
    if (len >= 0) {
      x = {in_stage[staged_in], in_stage[staged_in + plane], in_stage[staged_in + 2 * plane]};
      h_prev = cur[out];
    }
    float v[V];
    lane_products<3, G, BT, Q, NA, true>(w, cur, q, v);
    reduce_group_level<V, V, Q / 2, 3>(v, lane);
    exchange.before_push();
    if (len >= 0) {
      const int t = step_time(s);
      const int staged_out = (k & 1) * kOutputPlanes * plane + i * BT * nc + at;
      float h = 0.0f;
      if (t < len) {
        const GruGates f = gru_cell_forward_fast(x, {v[0], v[1], v[2]}, bias, h_prev);
        h = f.h;
        out_stage[staged_out] = f.r;
        out_stage[staged_out + plane] = f.z;
        out_stage[staged_out + 2 * plane] = f.n;
        out_stage[staged_out + 3 * plane] = f.hn;
      }
      out_stage[staged_out + 4 * plane] = h;
      nxt[out] = h;
      exchange.push(s, nxt + out, h);
    }
  });
}

// CTAs a direction, measured (H200, fp32, forward us a step at batch 1 / 2, session 69): a step
// costs about the shared-memory reads of the state (NC H / 32 LDS.128 a CTA) and the FMAs a thread,
// so more CTAs win until the cluster's exchange dominates. H 64: one CTA 0.59 / 0.75, 4 CTAs 0.47 /
// 0.54, 8 0.47 / 0.52; H 128: 2 CTAs 0.80 / 1.04, 4 0.60 / 0.73, 8 0.52 / 0.60, 16 0.56 / 0.63;
// H 192: 8 0.65 / 0.80, 16 0.57 / 0.67; H 256: 8 0.70 / 0.94, 16 0.65 / 0.76. At H 32 one CTA
// (0.49 at batch 2) was as fast as a cluster of 8 (0.50), without a cluster's launch rules.
int default_ctas(int hidden) {
  return hidden <= 32 ? 1 : hidden <= 128 ? 8 : 16;
}
// Column groups of a kernel: a cluster's rounded up to even (fewer instantiations).
int kernel_groups(int hidden, int ctas) {
  const int g = column_groups(hidden);
  return ctas > 1 ? (g + 1) / 2 * 2 : g;
}

struct Instance {
  int groups, batch_tile, ctas;
  const void* fn;
};
template <int G, int BT, int N>
Instance instance() {
  return {G, BT, N, reinterpret_cast<const void*>(pgru_single_kernel_t<G, BT, N>)};
}
// Every instantiation a tiling reaches (default_ctas's): one CTA to H 32, clusters of 8 at H
// 33-128 and of 16 at H 129-384 (to pgru_single_max_hidden's at batch tiles 2 and 4).
const void* find_kernel(int groups, int batch_tile, int ctas) {
  static const Instance kInstances[] = {
      instance<1, 1, 1>(),   instance<2, 1, 8>(),   instance<4, 1, 8>(),   instance<6, 1, 16>(),
      instance<8, 1, 16>(),  instance<10, 1, 16>(), instance<12, 1, 16>(), instance<1, 2, 1>(),
      instance<2, 2, 8>(),   instance<4, 2, 8>(),   instance<6, 2, 16>(),  instance<8, 2, 16>(),
      instance<10, 2, 16>(), instance<1, 4, 1>(),   instance<2, 4, 8>(),   instance<4, 4, 8>(),
      instance<6, 4, 16>()};
  for (const Instance& i : kInstances)
    if (i.groups == groups && i.batch_tile == batch_tile && i.ctas == ctas) return i.fn;
  return nullptr;
}

}  // namespace

int pgru_single_batch_tile(int max_batch) {
  return max_batch <= 1 ? 1 : max_batch <= 2 ? 2 : 4;
}

int pgru_single_max_hidden(int batch_tile) {
  return batch_tile == 1   ? kPgruSingleMaxHidden
         : batch_tile == 2 ? kPgruSingleMaxHiddenBatchTile2
                           : kPgruSingleMaxHiddenBatchTile4;
}

PgruSingleTiling pgru_single_tiling(int hidden, int max_batch, int directions, int ctas) {
  PgruSingleTiling t;
  t.hidden = hidden;
  t.max_batch = max_batch;
  t.directions = directions;
  t.batch_tile = pgru_single_batch_tile(max_batch);
  t.ctas_per_direction = ctas > 0 ? ctas : default_ctas(hidden);
  t.neurons_per_cta = (hidden + t.ctas_per_direction - 1) / t.ctas_per_direction;
  t.threads = std::min(1024, (t.neurons_per_cta * kLanesPerNeuron + 31) / 32 * 32);
  return t;
}

const void* pgru_single_kernel(const PgruSingleTiling& t) {
  const bool valid =
      t.max_batch > 0 && t.max_batch <= kPgruSingleMaxBatch &&
      t.batch_tile == pgru_single_batch_tile(t.max_batch) && t.hidden > 0 &&
      t.hidden <= pgru_single_max_hidden(t.batch_tile) && t.ctas_per_direction > 0 &&
      (t.directions == 1 || t.directions == 2) &&
      t.neurons_per_cta == (t.hidden + t.ctas_per_direction - 1) / t.ctas_per_direction &&
      t.neurons_per_cta * kLanesPerNeuron <= 1024 &&
      t.threads == (t.neurons_per_cta * kLanesPerNeuron + 31) / 32 * 32;
  return valid ? find_kernel(kernel_groups(t.hidden, t.ctas_per_direction), t.batch_tile,
                             t.ctas_per_direction)
               : nullptr;
}

size_t pgru_single_shared_bytes(const PgruSingleTiling& t) {
  // Two state buffers of {BT, 32 G} floats, then two chunks of 3 input and 5 output planes, each
  // {BT, NC} floats a step (this CTA's neurons), then a cluster's two mbarriers, then the batch
  // rows' lengths.
  const int g = kernel_groups(t.hidden, t.ctas_per_direction);
  const size_t state = 2 * size_t(t.batch_tile) * 4 * kLanesPerNeuron * g;
  const size_t staged = size_t(2) * (kInputPlanes + kOutputPlanes) * 32 * t.neurons_per_cta;
  const size_t barriers = t.ctas_per_direction > 1 ? 2 * sizeof(uint64_t) : 0;
  return (state + staged) * sizeof(float) + barriers + t.batch_tile * sizeof(int);
}

PrnnKernelInfo pgru_single_kernel_info(const PgruSingleTiling& t) {
  const void* fn = pgru_single_kernel(t);
  DS2_CHECK(fn != nullptr, "persistent GRU (one CTA): no kernel for hidden "
                               << t.hidden << ", batch " << t.max_batch << ", "
                               << t.ctas_per_direction << " CTAs a direction");
  PrnnKernelInfo info = cooperative_kernel_info(fn, t.threads, pgru_single_shared_bytes(t));
  if (t.ctas_per_direction > 1 && info.blocks_per_sm > 0)
    info.max_clusters = cluster_max_active(fn, t.ctas(), t.ctas_per_direction, t.threads,
                                           pgru_single_shared_bytes(t));
  return info;
}

void pgru_single_forward_launch(const PgruSingleTiling& t, const PgruDirection* dirs,
                                const int* lengths, int T, int B, cudaStream_t stream) {
  DS2_CHECK(T >= 0 && B >= 0, "persistent GRU (one CTA): negative sizes T " << T << ", B " << B);
  if (T == 0 || B == 0) return;
  const void* fn = pgru_single_kernel(t);
  DS2_CHECK(fn != nullptr, "persistent GRU (one CTA): no kernel for hidden "
                               << t.hidden << ", batch " << t.max_batch << ", "
                               << t.ctas_per_direction << " CTAs a direction");
  DS2_CHECK(B <= t.max_batch, "persistent GRU (one CTA): batch "
                                  << B << " exceeds the plan's maximum " << t.max_batch);
  DS2_CHECK(lengths != nullptr, "persistent GRU (one CTA): null lengths");
  SingleGruArgs a{};
  for (int i = 0; i < t.directions; ++i) {
    const PgruDirection& p = dirs[i];
    DS2_CHECK(p.u && p.bias_h && p.gates && p.candidate && p.h,
              "persistent GRU (one CTA): null operand of direction " << i);
    a.dir[i] = {p.u, p.bias_h, p.gates, p.candidate, p.h, p.ld_gates, p.reverse ? 1 : 0};
  }
  if (t.directions == 1) a.dir[1] = a.dir[0];
  a.lengths = lengths;
  a.T = T;
  a.B = B;
  a.H = t.hidden;
  a.neurons_per_cta = t.neurons_per_cta;
  const size_t smem = pgru_single_shared_bytes(t);
  if (t.ctas_per_direction == 1) {
    cooperative_launch("persistent GRU (one CTA)", fn, t.directions, t.threads, &a, smem, stream);
    return;
  }
  // The two directions' clusters never wait for each other.
  cluster_launch(fn, t.ctas(), t.ctas_per_direction, t.threads, smem, &a, stream);
}

}  // namespace ds2::kernels
