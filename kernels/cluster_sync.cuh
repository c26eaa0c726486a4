// Device-side pieces the thread-block-cluster kernels share (kernels/persistent_rnn_cluster.cu,
// the cluster form of kernels/persistent_rnn_single.cu): the cluster barrier, another CTA's view of
// a shared-memory address, and an mbarrier whose phase completes when its one arrival and the
// bytes it expects (pushed by other CTAs with st.async) are in.
//
//   if (threadIdx.x == 0) mbarrier_init_one(&bar);  // then cluster_sync_all(), before any push
//   if (threadIdx.x == 0) mbarrier_arrive_expecting(&bar, bytes_from_the_others);
//   const uint32_t to = map_to_rank(shared_address(dst), peer);
//   push_to_rank(to, v, map_to_rank(shared_address(&bar), peer));
//   mbarrier_wait(&bar, parity);  // the parity flips with each completed phase
#pragma once

#include <cstdint>

namespace ds2::kernels {

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t map_to_rank(uint32_t address, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(address), "r"(rank));
  return r;
}
// The cluster barrier, in halves (work may run between them) or whole.
__device__ __forceinline__ void cluster_arrive_release() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait_acquire() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_sync_all() {
  cluster_arrive_release();
  cluster_wait_acquire();
}
__device__ __forceinline__ void mbarrier_init_one(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(shared_address(bar)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbarrier_arrive_expecting(uint64_t* bar, uint32_t bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(bar)),
      "r"(bytes)
      : "memory");
}
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n .reg .pred p;\n"
        " mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(shared_address(bar)), "r"(parity)
        : "memory");
}
// Writes v to `remote` (a shared::cluster address) and counts its 4 bytes on `remote_bar`.
__device__ __forceinline__ void push_to_rank(uint32_t remote, float v, uint32_t remote_bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n" ::"r"(remote),
      "r"(__float_as_uint(v)), "r"(remote_bar)
      : "memory");
}

}  // namespace ds2::kernels
