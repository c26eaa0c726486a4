// The step barrier of the grid-wide persistent RNN kernels (versions 2 and 3): every CTA of one
// direction meets there after each timestep; the two directions of a launch share nothing.
//
//   auto next = [&] { prefetch(s + 1); };
//   direction_barrier(arrivals + direction, (s + 1) * ctas_per_direction, next);
//   end_step<kTags>(arrivals + direction, (s + 1) * ctas_per_direction, next);  // or tags
#pragma once

namespace ds2::kernels {

// A grid barrier over one direction's CTAs (co-resident: the launches are cooperative). Arrivals
// only grow during a launch (the counter is zeroed before it), so step s waits for (s + 1) x
// CTAs; the release add publishes the CTA's writes (ordered before it by the CTA barrier), the
// acquire load the other CTAs'. `between` runs on every thread after the CTA has arrived and
// before it waits: work that the other CTAs do not need (this barrier does not publish it) and
// that would otherwise delay the arrival.
template <class Between>
__device__ __forceinline__ void direction_barrier(unsigned int* arrivals, unsigned int target,
                                                  Between between) {
  __syncthreads();
  if (threadIdx.x == 0)
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(arrivals) : "memory");
  between();
  if (threadIdx.x == 0) {
    unsigned int seen;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(arrivals) : "memory");
    } while (seen < target);
  }
  __syncthreads();
}

// The end of a step of a grid-wide persistent kernel. With a tagged exchange
// (kernels/tagged_exchange.cuh) the readers wait for the values themselves: only a CTA barrier,
// after `between`, so the CTA's own warps do not poll the next step while its epilogue still runs
// (and, in version 3, do not overwrite the reduction buffer it reads). Otherwise the direction's
// step barrier, with `between` inside it.
template <bool kTagged, class Between>
__device__ __forceinline__ void end_step(unsigned int* arrivals, unsigned int target,
                                         Between between) {
  if constexpr (kTagged) {
    between();
    __syncthreads();
  } else {
    direction_barrier(arrivals, target, between);
  }
}

}  // namespace ds2::kernels
