#include <algorithm>
#include <cstdint>

#include "core/cuda/check.h"
#include "core/error.h"
#include "kernels/async_copy.cuh"
#include "kernels/clipped_relu.cuh"
#include "kernels/cooperative_launch.h"
#include "kernels/persistent_rnn_operands.h"
#include "kernels/persistent_rnn_single.h"
#include "kernels/reduce_scatter_order.h"

namespace ds2::kernels {
namespace {

// The state lives in shared memory; the device view's xbuf is unused.
using SingleDir = PrnnDeviceDirection<float>;
// Steps a chunk of the epilogue's staged inputs and outputs holds (32 batch rows' worth).
template <int BT>
constexpr int kChunk = 32 / BT;

struct SingleArgs {
  SingleDir dir[2];
  const int* lengths;
  int T, B, H;
  float clip;
  int backward;
};

int columns_per_lane(int hidden) {
  return std::max(1, (hidden + 31) / 32);
}
int warps_for(int hidden) {
  const int kc = columns_per_lane(hidden);
  return (hidden + kc - 1) / kc;
}
int batch_tile_for(int max_batch) {
  return max_batch <= 2 ? max_batch : 4;
}

// Lane `lane`'s value after reduce_scatter<VP>: which of the VP values it ends up holding the
// warp's sum of (lanes that differ only in their low 5 - log2(VP) bits hold the same one).
template <int VP>
__device__ __forceinline__ int reduce_scatter_index(int lane) {
  int index = 0;
#pragma unroll
  for (int n = VP, o = 16; n > 1; n >>= 1, o >>= 1)
    if (lane & o) index += n / 2;
  return index;
}

// One halving level of reduce_scatter: N values kept so far, lane bit O choosing the half.
// Recursive per level, so that every index is a constant (a loop with level-dependent bounds left
// v in local memory, as kernels/persistent_rnn_math.cuh found for its own reduce-scatter).
template <int VP, int N, int O>
__device__ __forceinline__ void reduce_scatter_level(float (&v)[VP], int lane) {
  if constexpr (N > 1) {
    // Bit masks, not `upper ? v[k] : v[k + N / 2]`, which the compiler may turn into an index.
    const int upper = (lane & O) != 0 ? -1 : 0;
#pragma unroll
    for (int k = 0; k < N / 2; ++k) {
      const int lo = __float_as_int(v[k]), hi = __float_as_int(v[k + N / 2]);
      const float send = __int_as_float((lo & upper) | (hi & ~upper));
      const float keep = __int_as_float((hi & upper) | (lo & ~upper));
      v[k] = keep + __shfl_xor_sync(0xffffffffu, send, O);
    }
    reduce_scatter_level<VP, N / 2, O / 2>(v, lane);
  } else if constexpr (O >= 1) {
    v[0] += __shfl_xor_sync(0xffffffffu, v[0], O);
    reduce_scatter_level<VP, 1, O / 2>(v, lane);
  }
}

// Sums v[i] over the warp's 32 lanes for VP (a power of two <= 32) values, halving the values a
// lane keeps at each of the first log2(VP) levels (the upper half where the level's lane bit is
// set) and adding whole at the rest; v[0] ends as the sum of value reduce_scatter_index<VP>(lane).
// About VP + 5 shuffles instead of 5 VP. The order of the additions is the same on every launch.
// Not the fp32-math kernel's select-free reduce-scatter (kernels/reduce_scatter_order.h, for 4-16
// values): that one has each lane hold its values in a lane-permuted order, which here would mean
// weight rows permuted per lane and padded to a power of two (48 weights a thread instead of 36 at
// 6 columns a lane, past the 64 registers 1024 threads leave); selects by bit mask cost less.
template <int VP>
__device__ __forceinline__ void reduce_scatter(float (&v)[VP], int lane) {
  reduce_scatter_level<VP, VP, 16>(v, lane);
}

__host__ __device__ constexpr int pow2_at_least(int v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}

// KC: columns a lane and rows a warp; BT: batch rows a launch (1, 2 or 4).
template <int KC, int BT>
__global__ void __launch_bounds__(1024, 1) prnn_single_kernel_t(const SingleArgs a) {
  constexpr int HP = 32 * KC;  // the state's padded row
  constexpr int V = KC * BT, VP = pow2_at_least(V);
  extern __shared__ __align__(16) float state[];  // [2 buffers][BT][HP], then the chunks
  const SingleDir d = blockIdx.x ? a.dir[1] : a.dir[0];
  const int H = a.H, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int row0 = warp * KC;

  // This lane's weights: rows row0 + i, columns lane + 32 j (U's for the forward, U^T's for
  // backward-data), zero past H.
  float w[KC][KC];
#pragma unroll
  for (int i = 0; i < KC; ++i)
#pragma unroll
    for (int j = 0; j < KC; ++j) {
      const int r = row0 + i, c = lane + 32 * j;
      w[i][j] =
          r < H && c < H ? (a.backward ? d.u[int64_t{c} * H + r] : d.u[int64_t{r} * H + c]) : 0.0f;
    }
  for (int i = threadIdx.x; i < 2 * BT * HP; i += blockDim.x) state[i] = 0.0f;

  // The output this lane writes each step: value `mine` = i * BT + b of the reduce-scatter.
  const int mine = reduce_scatter_index<VP>(lane);
  const int my_row = row0 + mine / BT, my_b = mine % BT;
  const bool writer = mine < V && reduce_scatter_stores<VP>(lane) && my_row < H && my_b < a.B;
  const int my_len = writer ? a.lengths[my_b] : 0;
  const int T = a.T, B = a.B;
  // The epilogue's inputs (x, and h for backward-data) and its outputs y move between global and
  // shared memory kChunk steps at a time, by every thread: the next chunk's inputs are copied
  // (cp.async) while this one runs, the last chunk's outputs stored while this one runs. A step
  // then touches shared memory only; copies or stores a step of their own set the pace
  // (kernels/NOTES.md, session 67: H 32 0.63 us a step that way, 0.33 without the per-step global
  // traffic, the reduction and the barrier).
  constexpr int C = kChunk<BT>, kStage = C * BT * HP;  // floats a chunk
  float* x_stage = state + 2 * BT * HP;                // [2 chunks][C][BT][HP]
  float* h_stage = x_stage + 2 * kStage;               // backward-data's h, the same
  float* y_stage = h_stage + 2 * kStage;               // [2 chunks][C][BT][HP]
  auto step_time = [&](int s) { return d.descending ? T - 1 - s : s; };
  // Element e of chunk k's C * B * H values: step k C + e / (B H), batch row, column.
  auto chunk_inputs = [&](int k) {
    const int steps = min(C, T - k * C);
    float* xs = x_stage + (k & 1) * kStage;
    float* hs = h_stage + (k & 1) * kStage;
    for (int e = threadIdx.x; e < steps * B * H; e += blockDim.x) {
      const int i = e / (B * H), b = (e / H) % B, r = e % H;
      const int64_t row = int64_t{step_time(k * C + i)} * B + b;
      const int at = (i * BT + b) * HP + r;
      cp_async4(xs + at, d.x + row * d.ld_x + r);
      if (a.backward) cp_async4(hs + at, d.h + row * d.ld_h + r);
    }
    cp_async_commit();
  };
  auto chunk_outputs = [&](int k) {
    const int steps = min(C, T - k * C);
    const float* ys = y_stage + (k & 1) * kStage;
    for (int e = threadIdx.x; e < steps * B * H; e += blockDim.x) {
      const int i = e / (B * H), b = (e / H) % B, r = e % H;
      const int64_t row = int64_t{step_time(k * C + i)} * B + b;
      d.y[row * d.ld_y + r] = ys[(i * BT + b) * HP + r];
    }
  };
  chunk_inputs(0);
  cp_async_wait_all();
  __syncthreads();

  for (int s = 0; s < T; ++s) {
    const int k = s / C, i = s - k * C;
    if (i == 0) {
      // Chunk k's inputs have landed (waited for before the last barrier); chunk k + 1's go into
      // the buffer chunk k - 1 read, and chunk k - 1's outputs leave.
      if ((k + 1) * C < T) chunk_inputs(k + 1);
      if (k > 0) chunk_outputs(k - 1);
    }
    const float* cur = state + (s & 1) * BT * HP;
    float* nxt = state + ((s & 1) ^ 1) * BT * HP;
    float v[VP];
#pragma unroll
    for (int q = 0; q < VP; ++q) v[q] = 0.0f;
#pragma unroll
    for (int j = 0; j < KC; ++j)
#pragma unroll
      for (int b = 0; b < BT; ++b) {
        const float hv = cur[b * HP + lane + 32 * j];
#pragma unroll
        for (int q = 0; q < KC; ++q) v[q * BT + b] = fmaf(w[q][j], hv, v[q * BT + b]);
      }
    reduce_scatter<VP>(v, lane);
    if (writer) {
      const int at = (k & 1) * kStage + (i * BT + my_b) * HP + my_row;
      const float x = x_stage[at];
      const float h = a.backward ? h_stage[at] : 0.0f;
      float y = 0.0f;
      if (step_time(s) < my_len)
        y = a.backward ? clipped_relu_grad(h, x + v[0], a.clip) : clipped_relu(x + v[0], a.clip);
      nxt[my_b * HP + my_row] = y;
      y_stage[at] = y;
    }
    if (i == C - 1) cp_async_wait_all();  // chunk k + 1's inputs, before the barrier shows them
    __syncthreads();
  }
  chunk_outputs((T - 1) / C);  // the last chunk's (the loop left each earlier one as it went)
}

template <int KC>
const void* kernel_for_batch(int bt) {
  switch (bt) {
    case 1:
      return reinterpret_cast<const void*>(prnn_single_kernel_t<KC, 1>);
    case 2:
      return reinterpret_cast<const void*>(prnn_single_kernel_t<KC, 2>);
    case 4:
      return reinterpret_cast<const void*>(prnn_single_kernel_t<KC, 4>);
    default:
      return nullptr;
  }
}

}  // namespace

PrnnTiling prnn_single_tiling(int hidden, int max_batch, int directions) {
  PrnnTiling t;
  t.hidden = hidden;
  t.max_batch = max_batch;
  t.directions = directions;
  t.single_cta = true;
  t.batch_tile = batch_tile_for(max_batch);
  t.rows_per_cta = hidden;
  t.ctas_per_direction = 1;
  t.threads = 32 * warps_for(hidden);
  return t;
}

const void* prnn_single_kernel(const PrnnTiling& t) {
  const PrnnTiling own = prnn_single_tiling(t.hidden, t.max_batch, t.directions);
  const bool valid = t.hidden > 0 && t.single_cta && !t.tensor_cores && !t.cluster &&
                     !t.bf16_weights && t.max_batch <= kPrnnSingleMaxBatch &&
                     t.batch_tile == own.batch_tile && t.threads == own.threads &&
                     t.rows_per_cta == own.rows_per_cta && t.ctas_per_direction == 1 &&
                     t.batch_groups == 1 && t.streamed_groups == 0 && !t.tagged_exchange;
  if (!valid) return nullptr;
  switch (columns_per_lane(t.hidden)) {
    case 1:
      return kernel_for_batch<1>(t.batch_tile);
    case 2:
      return kernel_for_batch<2>(t.batch_tile);
    case 3:
      return kernel_for_batch<3>(t.batch_tile);
    case 4:
      return kernel_for_batch<4>(t.batch_tile);
    case 5:
      return kernel_for_batch<5>(t.batch_tile);
    case 6:
      return kernel_for_batch<6>(t.batch_tile);
    default:
      return nullptr;
  }
}

size_t prnn_single_shared_bytes(const PrnnTiling& t) {
  // Two state buffers, then two chunks each of x, h and y, each {BT, 32 KC} floats a step.
  const size_t step = size_t(t.batch_tile) * 32 * columns_per_lane(t.hidden) * sizeof(float);
  return (2 + 3 * 2 * size_t(32 / t.batch_tile)) * step;
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
  a.clip = clip;
  a.backward = backward ? 1 : 0;
  cooperative_launch("persistent RNN (one CTA)", fn, t.directions, t.threads, &a,
                     prnn_single_shared_bytes(t), stream);
}

}  // namespace ds2::kernels
