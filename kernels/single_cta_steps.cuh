// The step loop the single-CTA kernels share (kernels/persistent_rnn_single.cu, the clipped-ReLU
// recurrence, and kernels/persistent_gru_single.cu, the GRU forward; a step's sums are
// kernels/lane_group_sums.cuh): the state is double-buffered in shared memory; a cluster's CTAs
// push their part of each step's state into the others' next buffer (st.async counted on that
// buffer's mbarrier); the kernel's inputs and outputs move between global and shared memory a
// chunk of C steps at a time, the next chunk's inputs copied and the last chunk's outputs stored
// while a chunk runs.
//
//   ClusterStateExchange<N> exchange{arrived, pushed_in, rank};  // arrived: 2 mbarriers (N > 1)
//   exchange.start();                                            // before any push
//   run_chunked_steps<C>(T, exchange, chunk_inputs, chunk_outputs, [&](int s, int k, int i) {
//     ... sum the state of buffer s & 1, exchange.before_push();
//     nxt[at] = v;  exchange.push(s, nxt + at, v);               // into buffer (s & 1) ^ 1
//   });
//   for (ChunkWalk e(threadIdx.x, blockDim.x, B, H); e.i < steps; e.next(B, H)) ...  // a chunk
#pragma once

#include <cstdint>

#include "kernels/async_copy.cuh"
#include "kernels/cluster_sync.cuh"

namespace ds2::kernels {

// N CTAs a direction; with N == 1 every member is a no-op (one CTA keeps the whole state).
template <int N>
struct ClusterStateExchange {
  uint64_t* arrived;      // each state buffer's mbarrier, in shared memory
  uint32_t pushed_in;     // the bytes a buffer's phase waits for: the other CTAs' part of a step
  int rank;               // this CTA's in the cluster
  uint32_t parities = 0;  // bit b: the phase parity buffer b's mbarrier waits for next

  // Every CTA's state zeroed (by the caller, before this) and its mbarriers set before anyone
  // pushes into them.
  __device__ __forceinline__ void start() {
    if constexpr (N > 1) {
      if (threadIdx.x == 0) {
        mbarrier_init_one(&arrived[0]);
        mbarrier_init_one(&arrived[1]);
      }
      cluster_sync_all();
    }
  }
  // Step s writes buffer (s & 1) ^ 1: its phase expects the others' bytes.
  __device__ __forceinline__ void expect(int s) {
    if constexpr (N > 1)
      if (threadIdx.x == 0) mbarrier_arrive_expecting(&arrived[(s & 1) ^ 1], pushed_in);
  }
  // Every warp here has read step s's state before another CTA, having this CTA's part of the
  // next step, may push the step after into that buffer.
  __device__ __forceinline__ void before_push() {
    if constexpr (N > 1) __syncthreads();
  }
  // v, just stored at `slot` of step s's output buffer, into the same place of every other CTA's.
  __device__ __forceinline__ void push(int s, const float* slot, float v) {
    if constexpr (N > 1) {
      const uint32_t to = shared_address(slot);
      const uint32_t bar = shared_address(&arrived[(s & 1) ^ 1]);
#pragma unroll
      for (int p = 1; p < N; ++p) {
        const uint32_t peer = static_cast<uint32_t>((rank + p) % N);
        push_to_rank(map_to_rank(to, peer), v, map_to_rank(bar, peer));
      }
    }
  }
  // After the step's __syncthreads: the others' part of step s's output has landed.
  __device__ __forceinline__ void wait(int s) {
    if constexpr (N > 1) {
      const int b = (s & 1) ^ 1;
      mbarrier_wait(&arrived[b], (parities >> b) & 1u);
      parities ^= 1u << b;
    }
  }
  // No CTA leaves while another may still address it.
  __device__ __forceinline__ void finish() {
    if constexpr (N > 1) cluster_sync_all();
  }
};

// A chunk's elements e = threadIdx.x, + blockDim.x, ... of its steps * B * H, walked as (step i,
// batch row b, column r) by adding the stride's own (i, b, r): a division by a run-time divisor
// is a chain of ~20 instructions, and three an element made the chunk loops cost 190-840 cycles
// a step (kernels/NOTES.md, session 68).
struct ChunkWalk {
  int i, b, r;     // the element
  int di, db, dr;  // the stride, blockDim.x
  __device__ ChunkWalk(int start, int stride, int B, int H)
      : i(start / (B * H)),
        b(start / H % B),
        r(start % H),
        di(stride / (B * H)),
        db(stride / H % B),
        dr(stride % H) {}
  __device__ void next(int B, int H) {
    i += di;
    b += db;
    r += dr;
    if (r >= H) {
      r -= H;
      ++b;
    }
    if (b >= B) {
      b -= B;
      ++i;
    }
  }
};

// Steps 0 .. T-1 in chunks of C: chunk_inputs(k) starts chunk k's copies (cp.async, committed),
// chunk_outputs(k) stores chunk k's staged outputs, step(s, k, i) runs step s = k C + i (reading
// only shared memory). Every thread of the CTA calls it.
template <int C, int N, class Inputs, class Outputs, class Step>
__device__ __forceinline__ void run_chunked_steps(int T, ClusterStateExchange<N>& exchange,
                                                  Inputs&& chunk_inputs, Outputs&& chunk_outputs,
                                                  Step&& step) {
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
    exchange.expect(s);
    step(s, k, i);
    if (i == C - 1) cp_async_wait_all();  // chunk k + 1's inputs, before the barrier shows them
    __syncthreads();
    exchange.wait(s);
  }
  chunk_outputs((T - 1) / C);  // the last chunk's (the loop left each earlier one as it went)
  exchange.finish();
}

}  // namespace ds2::kernels
