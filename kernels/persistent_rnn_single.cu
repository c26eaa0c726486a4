#include <algorithm>
#include <cstdint>

#include "core/cuda/check.h"
#include "core/error.h"
#include "kernels/async_copy.cuh"
#include "kernels/clipped_relu.cuh"
#include "kernels/cluster_launch.h"
#include "kernels/cluster_sync.cuh"
#include "kernels/cooperative_launch.h"
#include "kernels/lane_group_sums.cuh"
#include "kernels/persistent_rnn_operands.h"
#include "kernels/persistent_rnn_single.h"
#include "kernels/single_cta_steps.cuh"

namespace ds2::kernels {
namespace {

// The state lives in shared memory; the device view's xbuf is unused.
using SingleDir = PrnnDeviceDirection<float>;
// Lanes that share a thread's rows, each summing a slice of the columns.
constexpr int kLanesPerRow = 8;
// Steps a chunk of the epilogue's staged inputs and outputs holds (32 batch rows' worth).
template <int BT>
constexpr int kChunk = 32 / BT;

struct SingleArgs {
  SingleDir dir[2];
  const int* lengths;
  int T, B, H;
  int rows_per_cta;  // a cluster's CTA c owns rows [c rows_per_cta, (c + 1) rows_per_cta)
  float clip;
  int backward;
};

// Float4 column groups a lane: lane q of a row group reads columns 4 (q + 8 m) + e, m < G.
int column_groups(int hidden) {
  return std::max(1, (hidden + 4 * kLanesPerRow - 1) / (4 * kLanesPerRow));
}
int batch_tile_for(int max_batch) {
  return max_batch <= 2 ? max_batch : 4;
}

// Threads a CTA of N at most: 8 a group of R rows of its ceil(32 G / N) (H <= 32 G).
template <int R, int G, int N>
constexpr int threads_max() {
  constexpr int t = ((32 * G + N - 1) / N + R - 1) / R * kLanesPerRow;
  return t > 1024 ? 1024 : (t + 31) / 32 * 32;
}

// R: rows a thread; G: float4 column groups a lane; BT: batch rows a launch; N: CTAs a direction
// (a cluster when N > 1). CTA c of a direction owns rows [c RC, (c + 1) RC), RC = rows_per_cta;
// its thread t holds rows c RC + R (t / 8) + i, i < R, of U (U^T for backward-data) at columns
// 4 (q + 8 m) + e, q = t % 8: a step reads the whole state as float4s, each value feeding R rows,
// and sums R BT values over 8 lanes. With N > 1 each CTA pushes its rows of the new state into
// every other CTA's copy (st.async), and a CTA's mbarrier for that buffer completes when all the
// other rows' bytes have arrived: no cluster barrier a step.
template <int R, int G, int BT, int N>
__global__ void __launch_bounds__(threads_max<R, G, N>(), 1)
    prnn_single_kernel_t(const SingleArgs a) {
  constexpr int Q = kLanesPerRow, HP = 4 * G * Q;  // HP: the state's padded row
  constexpr int V = R * BT;                        // values a thread sums a step
  constexpr int NA = V >= 4 ? 1 : 4 / V;           // accumulators a value, for ILP
  constexpr int NF = V / Q > 1 ? V / Q : 1;        // values a lane ends with
  extern __shared__ __align__(16) float state[];   // [2 buffers][BT][HP], then the chunks
  const SingleDir d = blockIdx.x / N ? a.dir[1] : a.dir[0];
  const int H = a.H, lane = threadIdx.x & 31;
  const int rank = N > 1 ? static_cast<int>(cluster_rank()) : 0;
  const int row_begin = rank * a.rows_per_cta, row_end = min(H, row_begin + a.rows_per_cta);
  const int own = row_end - row_begin;  // the rows this CTA stages (> 0: the plan's tiling)
  const int r0 = row_begin + threadIdx.x / Q * R, q = threadIdx.x % Q;
  float w[R][G][4];
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int m = 0; m < G; ++m)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = r0 + i, c = 4 * (q + Q * m) + e;
        w[i][m][e] = r < row_end && c < H
                         ? (a.backward ? d.u[int64_t{c} * H + r] : d.u[int64_t{r} * H + c])
                         : 0.0f;
      }
  for (int i = threadIdx.x; i < 2 * BT * HP; i += blockDim.x) state[i] = 0.0f;

  // The values this lane writes each step: first + n, n < NF, value v = i BT + b being row
  // r0 + i, batch row b. len -1: not this lane's to write.
  const int first = first_group_value<V, Q>(lane);
  const bool writer = (lane & (Q > V ? Q / V - 1 : 0)) == 0;
  const int T = a.T, B = a.B;
  // out: the value's place in the state; at: in a staged step ([BT][RC]).
  const int rc = a.rows_per_cta;
  int len[NF], out[NF], at[NF];
#pragma unroll
  for (int n = 0; n < NF; ++n) {
    const int b = (first + n) % BT, r = r0 + (first + n) / BT;
    len[n] = writer && b < B && r < row_end ? a.lengths[b] : -1;
    out[n] = b * HP + r;
    at[n] = b * rc + r - row_begin;
  }
  // The epilogue's inputs (x, and h for backward-data) and its outputs y move between global and
  // shared memory kChunk steps at a time, by every thread: the next chunk's inputs are copied
  // (cp.async) while this one runs, the last chunk's outputs stored while this one runs. A step
  // then touches shared memory only (kernels/NOTES.md, session 67: copies or stores a step of
  // their own set the pace).
  constexpr int C = kChunk<BT>;
  const int kStage = C * BT * rc;         // floats a chunk: this CTA's rows only
  float* x_stage = state + 2 * BT * HP;   // [2 chunks][C][BT][RC]
  float* h_stage = x_stage + 2 * kStage;  // backward-data's h, the same
  float* y_stage = h_stage + 2 * kStage;  // [2 chunks][C][BT][RC]
  // N > 1, after the chunks: each state buffer's mbarrier (an even float offset: 8-byte aligned).
  uint64_t* arrived = reinterpret_cast<uint64_t*>(y_stage + 2 * kStage);
  auto step_time = [&](int s) { return d.descending ? T - 1 - s : s; };
  // N > 1: a buffer's phase waits for the other CTAs' rows.
  ClusterStateExchange<N> exchange{arrived, static_cast<uint32_t>((H - own) * B * sizeof(float)),
                                   rank};
  exchange.start();
  const ChunkWalk walk(threadIdx.x, blockDim.x, B, own);
  auto chunk_inputs = [&](int k) {
    const int steps = min(C, T - k * C);
    float* xs = x_stage + (k & 1) * kStage;
    float* hs = h_stage + (k & 1) * kStage;
    for (ChunkWalk e = walk; e.i < steps; e.next(B, own)) {
      const int64_t row = int64_t{step_time(k * C + e.i)} * B + e.b;
      const int to = (e.i * BT + e.b) * rc + e.r, col = row_begin + e.r;
      cp_async4(xs + to, d.x + row * d.ld_x + col);
      if (a.backward) cp_async4(hs + to, d.h + row * d.ld_h + col);
    }
    cp_async_commit();
  };
  auto chunk_outputs = [&](int k) {
    const int steps = min(C, T - k * C);
    const float* ys = y_stage + (k & 1) * kStage;
    for (ChunkWalk e = walk; e.i < steps; e.next(B, own)) {
      const int64_t row = int64_t{step_time(k * C + e.i)} * B + e.b;
      d.y[row * d.ld_y + row_begin + e.r] = ys[(e.i * BT + e.b) * rc + e.r];
    }
  };
  run_chunked_steps<C>(T, exchange, chunk_inputs, chunk_outputs, [&](int s, int k, int i) {
    const float* cur = state + (s & 1) * BT * HP;
    float* nxt = state + ((s & 1) ^ 1) * BT * HP;
    // The epilogue's inputs first, so that their loads overlap the products.
    const int staged = (k & 1) * kStage + i * BT * rc;
    float x[NF], h[NF];
#pragma unroll
    for (int n = 0; n < NF; ++n) {
      x[n] = len[n] >= 0 ? x_stage[staged + at[n]] : 0.0f;
      h[n] = len[n] >= 0 && a.backward ? h_stage[staged + at[n]] : 0.0f;
    }
    float v[V];
    lane_products<R, G, BT, Q, NA, false>(w, cur, q, v);
    reduce_group_level<V, V, Q / 2>(v, lane);
    exchange.before_push();
#pragma unroll
    for (int n = 0; n < NF; ++n) {
      if (len[n] >= 0) {
        float y = 0.0f;
        if (step_time(s) < len[n])
          y = a.backward ? clipped_relu_grad(h[n], x[n] + v[n], a.clip)
                         : clipped_relu(x[n] + v[n], a.clip);
        nxt[out[n]] = y;
        y_stage[staged + at[n]] = y;
        exchange.push(s, nxt + out[n], y);
      }
    }
  });
}

// The form of a layer: rows a thread, float4 column groups a lane (the state's row padded to 32
// G), CTAs a direction. One CTA: 4 rows a thread above H 96 and at batch tile 2 above H 32, else
// 2 (the values a thread sums, rows times the batch tile, near 8: one a lane after the
// reduce-scatter). H200, graph-timed, forward us a step, 2 rows a thread / 4 (kernels/NOTES.md,
// session 68): batch 1 H 96 0.35 / 0.42, H 128 0.45 / 0.44, H 160 0.56 / 0.51; batch 2 H 32 0.28
// / 0.33, H 64 0.36 / 0.35, H 96 0.57 / 0.49; batch 4 H 32 0.35 / 0.51, H 96 0.77 / 0.95, H 128
// 1.15 / 1.03.
// Clusters (batch tile 1 at H 193-512, batch tile 2 at H 129-384, batch tile 4 at H 65-192): 2
// rows a thread, column groups rounded up to even, 8 CTAs a direction to H 384 and 16 above.
// Forward, 8 CTAs / 16: H 200 0.50 / 0.55, H 256 0.47 / 0.55, H 320 0.54 / 0.54, H 384 0.56 / 0.57,
// H 448 0.65 / 0.60, H 512 0.72 / 0.60; 2 or 4 CTAs were slower (H 256 0.59 and 0.48). Batch tile
// 2, 8 CTAs against the grid-wide split: H 129 0.49 / 0.84, H 192 0.51 / 0.86, H 256 0.60 / 0.91, H
// 384 0.87 / 0.92 (past H 384 the kernels at 14-16 column groups would spill). Batch tile 4
// (session 72), 8 CTAs against the split at batch 4: H 80 0.52 / 0.77, H 128 0.57 / 0.79, H 160
// 0.72 / 0.82, H 192 0.77 / 0.87, but H 256 0.92-0.96 / 0.90 and H 320-384 1.2-1.6 / 0.91-0.93; 16
// CTAs were no faster (H 192 0.78, H 256 0.94), nor 4 rows a thread or 1 (H 256 1.11, 0.95): a
// CTA's share of the rows is not what sets the pace there.
struct SingleShape {
  int rows, groups, ctas;
};
SingleShape single_shape(int hidden, int batch_tile) {
  const bool cluster =
      (batch_tile == 1 && hidden > kPrnnSingleMaxHidden) || (batch_tile == 2 && hidden > 128) ||
      (batch_tile == 4 && hidden > 64 && hidden <= kPrnnSingleClusterMaxHiddenBatchTile4);
  if (cluster) return {2, (column_groups(hidden) + 1) / 2 * 2, hidden <= 384 ? 8 : 16};
  return {hidden > 96 || (batch_tile == 2 && hidden > 32) ? 4 : 2, column_groups(hidden), 1};
}

// Every instantiation single_shape reaches (the host tests ask for each H and batch it serves).
struct Instance {
  int rows, groups, batch_tile, ctas;
  const void* fn;
};
template <int R, int G, int BT, int N>
Instance instance() {
  return {R, G, BT, N, reinterpret_cast<const void*>(prnn_single_kernel_t<R, G, BT, N>)};
}
const void* find_kernel(const SingleShape& f, int batch_tile) {
  static const Instance kInstances[] = {
      // One CTA, batch tile 1: H 1-96 on 2 rows a thread, H 97-192 on 4; batch tile 4: H 1-64.
      instance<2, 1, 1, 1>(), instance<2, 2, 1, 1>(), instance<2, 3, 1, 1>(),
      instance<4, 4, 1, 1>(), instance<4, 5, 1, 1>(), instance<4, 6, 1, 1>(),
      instance<2, 1, 4, 1>(), instance<2, 2, 4, 1>(),
      // One CTA, batch tile 2: H 1-32 on 2 rows, H 33-128 on 4.
      instance<2, 1, 2, 1>(), instance<4, 2, 2, 1>(), instance<4, 3, 2, 1>(),
      instance<4, 4, 2, 1>(),
      // Clusters: batch tile 1 at H 193-512, batch tile 2 at H 129-384, batch tile 4 at H 65-192.
      instance<2, 8, 1, 8>(), instance<2, 10, 1, 8>(), instance<2, 12, 1, 8>(),
      instance<2, 14, 1, 16>(), instance<2, 16, 1, 16>(), instance<2, 6, 2, 8>(),
      instance<2, 8, 2, 8>(), instance<2, 10, 2, 8>(), instance<2, 12, 2, 8>(),
      instance<2, 4, 4, 8>(), instance<2, 6, 4, 8>()};
  for (const Instance& i : kInstances)
    if (i.rows == f.rows && i.groups == f.groups && i.batch_tile == batch_tile && i.ctas == f.ctas)
      return i.fn;
  return nullptr;
}

}  // namespace

int prnn_single_rows_per_thread(int hidden, int batch_tile) {
  return single_shape(hidden, batch_tile).rows;
}

PrnnTiling prnn_single_tiling(int hidden, int max_batch, int directions) {
  PrnnTiling t;
  t.hidden = hidden;
  t.max_batch = max_batch;
  t.directions = directions;
  t.single_cta = true;
  t.batch_tile = batch_tile_for(max_batch);
  const SingleShape f = single_shape(hidden, t.batch_tile);
  t.ctas_per_direction = f.ctas;
  t.rows_per_cta = (hidden + f.ctas - 1) / f.ctas;
  t.threads =
      std::min(1024, ((t.rows_per_cta + f.rows - 1) / f.rows * kLanesPerRow + 31) / 32 * 32);
  return t;
}

const void* prnn_single_kernel(const PrnnTiling& t) {
  const PrnnTiling own = prnn_single_tiling(t.hidden, t.max_batch, t.directions);
  const bool valid = t.hidden > 0 && t.hidden <= kPrnnSingleClusterMaxHidden && t.single_cta &&
                     !t.tensor_cores && !t.cluster && !t.bf16_weights &&
                     t.max_batch <= kPrnnSingleMaxBatch && t.batch_tile == own.batch_tile &&
                     t.threads == own.threads && t.rows_per_cta == own.rows_per_cta &&
                     t.ctas_per_direction == own.ctas_per_direction && t.batch_groups == 1 &&
                     t.streamed_groups == 0 && !t.tagged_exchange &&
                     // every CTA of a cluster owns rows
                     (t.ctas_per_direction - 1) * t.rows_per_cta < t.hidden;
  return valid ? find_kernel(single_shape(t.hidden, t.batch_tile), t.batch_tile) : nullptr;
}

size_t prnn_single_shared_bytes(const PrnnTiling& t) {
  // Two state buffers of {BT, 32 G} floats, then two chunks each of x, h and y, each {BT, RC}
  // floats a step (this CTA's rows), then a cluster's two mbarriers.
  const int g = single_shape(t.hidden, t.batch_tile).groups;
  const size_t state = 2 * size_t(t.batch_tile) * 4 * kLanesPerRow * g;
  const size_t staged = 3 * 2 * size_t(32 / t.batch_tile) * t.batch_tile * t.rows_per_cta;
  const size_t barriers = t.ctas_per_direction > 1 ? 2 * sizeof(uint64_t) : 0;
  return (state + staged) * sizeof(float) + barriers;
}

int prnn_single_max_clusters(const PrnnTiling& t) {
  const void* fn = prnn_single_kernel(t);
  if (fn == nullptr || t.ctas_per_direction == 1) return 0;
  return cluster_max_active(fn, t.ctas(), t.ctas_per_direction, t.threads,
                            prnn_single_shared_bytes(t));
}

void prnn_single_launch(const PrnnTiling& t, bool backward, const PrnnDirection* dirs,
                        const int* lengths, int T, int B, float clip, cudaStream_t stream) {
  const void* fn = prnn_single_kernel(t);
  DS2_CHECK(fn != nullptr, "persistent RNN (one CTA): no kernel for hidden "
                               << t.hidden << ", batch " << t.max_batch);
  SingleArgs a{};
  for (int i = 0; i < t.directions; ++i)
    a.dir[i] =
        prnn_device_direction<float>("persistent RNN (one CTA)", dirs[i], i, backward, nullptr);
  if (t.directions == 1) a.dir[1] = a.dir[0];
  a.lengths = lengths;
  a.T = T;
  a.B = B;
  a.H = t.hidden;
  a.rows_per_cta = t.rows_per_cta;
  a.clip = clip;
  a.backward = backward ? 1 : 0;
  if (t.ctas_per_direction == 1) {
    cooperative_launch("persistent RNN (one CTA)", fn, t.directions, t.threads, &a,
                       prnn_single_shared_bytes(t), stream);
    return;
  }
  // The two directions' clusters never wait for each other.
  cluster_launch(fn, t.ctas(), t.ctas_per_direction, t.threads, prnn_single_shared_bytes(t), &a,
                 stream);
}

}  // namespace ds2::kernels
