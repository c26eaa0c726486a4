// cp.async helpers shared by the persistent RNN kernels: global -> shared copies that run behind
// other work (epilogue inputs of the next step, the staged state), waited for as a group.
//
//   cp_async4(smem + i, gmem + j);
//   cp_async_commit();
//   ...                      // other work
//   cp_async_wait_all();     // this thread's copies have landed
#pragma once

namespace ds2::kernels {

__device__ __forceinline__ void cp_async4(float* smem_dst, const float* gmem_src) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(gmem_src) : "memory");
}
// 16 bytes through L2 only (.cg: never a stale L1 line, so it may read what other SMs wrote
// before a grid barrier); `valid` false writes 16 zero bytes instead of reading.
__device__ __forceinline__ void cp_async16_cg(float* smem_dst, const float* gmem_src, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}
// All but this thread's newest group have landed.
__device__ __forceinline__ void cp_async_wait_newest_pending() {
  asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}

}  // namespace ds2::kernels
