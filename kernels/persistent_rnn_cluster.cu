#include <cooperative_groups.h>

#include <algorithm>
#include <cstdint>

#include "core/bf16.h"
#include "core/cuda/check.h"
#include "core/error.h"
#include "kernels/async_copy.cuh"
#include "kernels/cluster_launch.h"
#include "kernels/cluster_sync.cuh"
#include "kernels/mma.cuh"
#include "kernels/persistent_rnn_cluster.h"
#include "kernels/persistent_rnn_epilogue.cuh"
#include "kernels/persistent_rnn_fragments.cuh"
#include "kernels/persistent_rnn_mma.h"
#include "kernels/persistent_rnn_operands.h"

namespace ds2::kernels {
namespace {

namespace cg = cooperative_groups;

constexpr int kWarps = kPrnnMmaWarps;
constexpr int kThreads = kPrnnMmaThreads;
constexpr int kBatch = kPrnnClusterMaxBatch;

// The exchange lives in shared memory; the device view's xbuf is unused.
using ClusterDir = PrnnDeviceDirection<uint16_t>;

struct ClusterArgs {
  ClusterDir dir[2];
  const int* lengths;
  int T, B, H, k_tiles, ctas_per_dir;
  float clip;
  int backward;
  int red_off, ep_off, len_off;  // shared memory carve-up in bytes (exchange at 0)
};

struct ClusterSmem {
  size_t red_off, ep_off, len_off, total;
};

// [2 parities][ctas * n k-tiles][32 lanes][4] bf16 exchange, then [warps][8][R + 4] partial
// sums, [2 parities][x | h][8][R] epilogue inputs, and the lengths.
ClusterSmem cluster_smem(const PrnnTiling& t) {
  const int n = t.rows_per_cta / 16, rows = t.rows_per_cta;
  ClusterSmem l{};
  size_t off = size_t(2) * t.ctas_per_direction * n * 32 * 4 * sizeof(uint16_t);
  l.red_off = off;
  off += size_t(kWarps) * kBatch * prnn_mma_partial_pitch(rows) * sizeof(float);
  l.ep_off = off;
  off += size_t(2) * 2 * kBatch * rows * sizeof(float);
  l.len_off = off;
  off += size_t(kBatch) * sizeof(int);
  l.total = (off + 15) / 16 * 16;
  return l;
}

// N: m-tiles per CTA, which is also the k-tiles per warp (both ceil(ceil(H / 16) / 16)).
template <int N>
__global__ void __launch_bounds__(kThreads, 1) prnn_cluster_kernel_t(const ClusterArgs a) {
  constexpr int R = 16 * N, kPitch = prnn_mma_partial_pitch(R);
  constexpr int kRedWarp = kBatch * kPitch;
  extern __shared__ __align__(16) unsigned char smem[];
  uint16_t* xch = reinterpret_cast<uint16_t*>(smem);        // [2][k-tiles][32][4]
  float* red = reinterpret_cast<float*>(smem + a.red_off);  // [warps][8][R + 4]
  float* ep = reinterpret_cast<float*>(smem + a.ep_off);    // [2][x | h][8][R]
  int* len_s = reinterpret_cast<int*>(smem + a.len_off);    // [B]

  cg::cluster_group cluster = cg::this_cluster();
  const int C = a.ctas_per_dir, rank = static_cast<int>(cluster.block_rank());
  const int di = static_cast<int>(blockIdx.x) / C;
  const ClusterDir d = di ? a.dir[1] : a.dir[0];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int H = a.H, B = a.B, T = a.T;
  const int kt0 = warp * N, kt_end = min(kt0 + N, a.k_tiles);
  const int r0 = rank * R;
  const bool bwd = a.backward != 0;
  const float clip = a.clip;
  const int xch_parity = C * N * 32 * 4;  // bf16 elements
  constexpr int kEpParity = 2 * kBatch * R, kEpH = kBatch * R;

  // Rows past B and columns past H are never written by a step but are read (multiplied by zero
  // weights, or filling unused mma columns): start from zeros everywhere.
  uint4* xch4 = reinterpret_cast<uint4*>(xch);
  for (int i = tid; i < 2 * xch_parity / 8; i += kThreads) xch4[i] = make_uint4(0, 0, 0, 0);
  for (int i = tid; i < B; i += kThreads) len_s[i] = a.lengths[i];

  // A fragments of this warp's k-tiles for the CTA's m-tiles; zero past H.
  uint32_t af[N][N][4];
#pragma unroll
  for (int kk = 0; kk < N; ++kk)
#pragma unroll
    for (int mt = 0; mt < N; ++mt)
      prnn_a_fragment(af[kk][mt], d.u, H, r0 + 16 * mt, kt0 + kk, g, q, bwd, kt0 + kk < kt_end);
  // Every CTA of the cluster is running and has zeroed its exchange before the first remote
  // write into it; also orders this CTA's shared-memory set-up.
  cluster.sync();

  // Epilogue inputs (x, and h for backward-data) of step s, copied one step ahead into ep[s & 1].
  auto prefetch = [&](int s) {
    prnn_prefetch_epilogue(ep + (s & 1) * kEpParity, kEpH, d, d.descending ? T - 1 - s : s, B, B, R,
                           r0, H, len_s, bwd, tid, tid / R, tid % R, kThreads);
  };
  if (T > 0) prefetch(0);

  for (int s = 0; s < T; ++s) {
    const int t = d.descending ? T - 1 - s : s;
    const uint16_t* xin = xch + ((s + 1) & 1) * xch_parity;  // the state step s - 1 wrote
    uint16_t* xout = xch + (s & 1) * xch_parity;
    const float* epx = ep + (s & 1) * kEpParity;
    cp_async_wait_all();  // this step's epilogue inputs (other threads': after the barrier)

    float acc[N][4];
#pragma unroll
    for (int mt = 0; mt < N; ++mt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][i] = 0.0f;
    if (s > 0) {  // else the zero state
      // B fragments from this CTA's own shared memory, one 8-byte load per lane each.
      const uint2* frags = reinterpret_cast<const uint2*>(xin);
      uint2 bf[N];
#pragma unroll
      for (int kk = 0; kk < N; ++kk)
        if (kt0 + kk < kt_end) bf[kk] = frags[(kt0 + kk) * 32 + lane];
#pragma unroll
      for (int kk = 0; kk < N; ++kk) {
        if (kt0 + kk >= kt_end) break;
#pragma unroll
        for (int mt = 0; mt < N; ++mt)
          mma_bf16_16816(acc[mt][0], acc[mt][1], acc[mt][2], acc[mt][3], af[kk][mt][0],
                         af[kk][mt][1], af[kk][mt][2], af[kk][mt][3], bf[kk].x, bf[kk].y);
      }
    }
    // Partial sums of this warp's k range, as [batch column][row].
    float* const mine = red + warp * kRedWarp + prnn_partials_lane(kPitch, g, q);
#pragma unroll
    for (int mt = 0; mt < N; ++mt) prnn_store_partials(mine, kPitch, 16 * mt, 0, acc[mt]);
    __syncthreads();

    // Warps summed in order, then the cell (clipped ReLU or its derivative) and the padding; the
    // new state goes into this CTA's own k-tiles of the exchange.
    for (int o = tid; o < B * R; o += kThreads) {
      const int b = o / R, m = o % R, k = r0 + m;
      if (k >= H) continue;
      const float out = t < len_s[b] ? prnn_cell_from_partials(
                                           red + b * kPitch + m, kRedWarp, kWarps, epx[b * R + m],
                                           bwd ? epx[kEpH + b * R + m] : 0.0f, bwd, clip)
                                     : 0.0f;
      d.y[(int64_t{t} * B + b) * d.ld_y + k] = out;
      xout[prnn_fragment_index(b, k, 1)] = float_to_bf16(out);
    }
    if (s + 1 < T) {
      __syncthreads();  // this CTA's slice of the new state is complete
      // Push it into every other CTA of the cluster (distributed shared memory), each thread a
      // 16-byte piece, destinations staggered by rank; only the lanes of real batch rows change
      // (b < B: the first 2 B of a k-tile's 16 pieces).
      const uint4* src = reinterpret_cast<const uint4*>(xout) + rank * N * 16;
      const int per_tile = 2 * B, pieces = N * per_tile;
      for (int i = tid; i < (C - 1) * pieces; i += kThreads) {
        const int dst = (rank + 1 + i / pieces) % C, p = i % pieces;
        const int c = p / per_tile * 16 + p % per_tile;
        *cluster.map_shared_rank(const_cast<uint4*>(src) + c, dst) = src[c];
      }
      // Publishes the pushes to the whole cluster and orders this CTA's reads of red and of the
      // exchange before their overwrites (every thread of every CTA takes part). The next step's
      // epilogue copies are issued between arriving and waiting, so they do not delay the
      // arrival.
      cluster_arrive_release();
      prefetch(s + 1);
      cluster_wait_acquire();
    }
  }
}

const void* kernel_for_tiles(int n) {
  switch (n) {
    case 1:
      return reinterpret_cast<const void*>(prnn_cluster_kernel_t<1>);
    case 2:
      return reinterpret_cast<const void*>(prnn_cluster_kernel_t<2>);
    case 3:
      return reinterpret_cast<const void*>(prnn_cluster_kernel_t<3>);
    case 4:
      return reinterpret_cast<const void*>(prnn_cluster_kernel_t<4>);
    default:
      return nullptr;
  }
}

}  // namespace

PrnnTiling prnn_cluster_tiling(int hidden, int max_batch, int directions) {
  PrnnTiling t;
  t.hidden = hidden;
  t.max_batch = max_batch;
  t.directions = directions;
  t.bf16_weights = t.tensor_cores = t.cluster = true;
  t.threads = kThreads;
  t.batch_tile = kBatch;
  const int n = std::max(1, prnn_mma_k_tiles_per_warp(hidden));  // m-tiles per CTA = kpw
  t.rows_per_cta = 16 * n;
  t.ctas_per_direction = (prnn_mma_k_tiles(hidden) + n - 1) / n;
  t.register_groups = t.rows_per_cta / kPrnnRowGroup;
  return t;
}

const void* prnn_cluster_kernel(const PrnnTiling& t) {
  const PrnnTiling own = prnn_cluster_tiling(t.hidden, t.max_batch, t.directions);
  const bool valid = t.hidden > 0 && t.cluster && t.tensor_cores && t.bf16_weights &&
                     t.threads == own.threads && t.batch_tile == own.batch_tile &&
                     t.max_batch <= kBatch && t.rows_per_cta == own.rows_per_cta &&
                     t.ctas_per_direction == own.ctas_per_direction &&
                     t.ctas_per_direction <= kPrnnClusterMaxCtas;
  return valid ? kernel_for_tiles(t.rows_per_cta / 16) : nullptr;
}

size_t prnn_cluster_shared_bytes(const PrnnTiling& t) {
  return cluster_smem(t).total;
}

int prnn_cluster_max_active(const PrnnTiling& t) {
  const void* fn = prnn_cluster_kernel(t);
  if (fn == nullptr) return 0;
  return cluster_max_active(fn, t.ctas(), t.ctas_per_direction, kThreads, cluster_smem(t).total);
}

void prnn_cluster_launch(const PrnnTiling& t, bool backward, const PrnnDirection* dirs,
                         const int* lengths, int T, int B, float clip, cudaStream_t stream) {
  const void* fn = prnn_cluster_kernel(t);
  DS2_CHECK(fn != nullptr, "persistent RNN (cluster): no kernel for this tiling");
  const ClusterSmem layout = cluster_smem(t);
  ClusterArgs a{};
  a.lengths = lengths;
  a.T = T;
  a.B = B;
  a.H = t.hidden;
  a.k_tiles = prnn_mma_k_tiles(t.hidden);
  a.ctas_per_dir = t.ctas_per_direction;
  a.clip = clip;
  a.backward = backward ? 1 : 0;
  a.red_off = static_cast<int>(layout.red_off);
  a.ep_off = static_cast<int>(layout.ep_off);
  a.len_off = static_cast<int>(layout.len_off);
  for (int i = 0; i < t.directions; ++i)
    a.dir[i] = prnn_device_direction("persistent RNN (cluster)", dirs[i], i, backward,
                                     static_cast<uint16_t*>(nullptr));
  if (t.directions == 1) a.dir[1] = a.dir[0];
  // A cluster that cannot be resident fails the launch (an error, never a hang): clusters are
  // scheduled whole, and the two directions' clusters never wait for each other.
  cluster_launch(fn, t.ctas(), t.ctas_per_direction, kThreads, layout.total, &a, stream);
}

}  // namespace ds2::kernels
