// How many multiply-adds a clock an SM's tensor cores do for the persistent kernels' product
// shape at batch 1 (a 16 x 16 tile of U times one 16 x 8 tile of the state): mma.sync m16n8k16
// (f16 in, f32 sums; what the kernels issue) at 4, 8 and 16 warps and 1-6 independent accumulator
// chains a warp, against Hopper's warpgroup wgmma m64n8k16 (A from registers, RS, or from shared
// memory, SS). A developer's measurement for kernels/NOTES.md (session 51), not part of ds2.
// Operands are unspecified: timing only.
//
//   scripts/dev/mma-rate.sh          # builds for sm_90a with nvcc and prints the table
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <type_traits>

constexpr int kIters = 4096;

__global__ void __launch_bounds__(512, 1) mma_sync_rate(float* out, int chains) {
  uint32_t a0 = threadIdx.x, a1 = a0 * 3, a2 = a0 * 5, a3 = a0 * 7, b0 = a0 ^ 9, b1 = a0 ^ 3;
  float c[6][4] = {};
  for (int i = 0; i < kIters; ++i) {
#pragma unroll
    for (int j = 0; j < 6; ++j) {
      if (j >= chains) break;
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
          "{%8,%9}, "
          "{%0,%1,%2,%3};"
          : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
  }
  float s = 0;
  for (int j = 0; j < 6; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
  if (s == 1234.5f) out[0] = s;
}

__device__ __forceinline__ uint64_t desc(const void* smem) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  // no swizzle; leading byte offset 128, stride byte offset 256 (any valid layout: timing only)
  return (uint64_t((addr >> 4) & 0x3FFF)) | (uint64_t(128 >> 4) << 16) | (uint64_t(256 >> 4) << 32);
}

template <bool kRegA, int kPer>
__global__ void __launch_bounds__(512, 1) wgmma_rate(float* out) {
  __shared__ __align__(128) uint16_t tiles[4][64 * 16];
  for (int i = threadIdx.x; i < 4 * 64 * 16; i += blockDim.x) (&tiles[0][0])[i] = i;
  __syncthreads();
  const int wg = threadIdx.x / 128;
  const uint64_t db = desc(tiles[wg]), da = desc(tiles[(wg + 1) & 3]);
  uint32_t a0 = threadIdx.x, a1 = a0 * 3, a2 = a0 * 5, a3 = a0 * 7;
  float d[2][4] = {};
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  for (int i = 0; i < kIters; ++i) {
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if constexpr (kRegA) {
        asm volatile(
            "{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, "
            "p, "
            "1, 1, 0; }"
            : "+f"(d[j & 1][0]), "+f"(d[j & 1][1]), "+f"(d[j & 1][2]), "+f"(d[j & 1][3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(db));
      } else {
        asm volatile(
            "{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, %4, %5, p, 1, 1, 0, "
            "0; }"
            : "+f"(d[j & 1][0]), "+f"(d[j & 1][1]), "+f"(d[j & 1][2]), "+f"(d[j & 1][3])
            : "l"(da), "l"(db));
      }
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  float s = d[0][0] + d[0][1] + d[0][2] + d[0][3] + d[1][0] + d[1][1] + d[1][2] + d[1][3];
  if (s == 1234.5f) out[0] = s;
}

int main() {
  int dev = 0, sms = 0, khz = 0, count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    fprintf(stderr, "mma_rate: no CUDA device\n");
    return 1;
  }
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev);
  float* out;
  cudaMalloc(&out, 4);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  auto time = [&](auto launch) {
    launch();
    cudaEventRecord(e0);
    for (int r = 0; r < 5; ++r) launch();
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    return ms / 5;
  };
  // MACs a clock at the device's clock rate (the H200 held 1980 MHz under this load, nvidia-smi)
  const double ghz = khz * 1e-6;
  for (int warps : {4, 8, 16})
    for (int chains : {1, 2, 3, 4, 6}) {
      const float ms = time([&] { mma_sync_rate<<<sms, 32 * warps>>>(out, chains); });
      const double macs = double(sms) * warps * chains * kIters * 2048;
      printf("mma.sync   warps %2d chains %d: %.3f ms, %.0f MAC/clk/SM (at %.2f GHz)\n", warps,
             chains, ms, macs / (ms * 1e-3) / sms / (ghz * 1e9), ghz);
    }
  auto run = [&](auto per_c) {
    constexpr int per = decltype(per_c)::value;
    for (int wgs : {1, 2, 4}) {
      const float ms = time([&] { wgmma_rate<true, per><<<sms, 128 * wgs>>>(out); });
      const double macs = double(sms) * wgs * per * kIters * 8192;
      printf("wgmma RS   wgs %d per-group %d: %.3f ms, %.0f MAC/clk/SM\n", wgs, per, ms,
             macs / (ms * 1e-3) / sms / (ghz * 1e9));
      const float ms2 = time([&] { wgmma_rate<false, per><<<sms, 128 * wgs>>>(out); });
      printf("wgmma SS   wgs %d per-group %d: %.3f ms, %.0f MAC/clk/SM\n", wgs, per, ms2,
             macs / (ms2 * 1e-3) / sms / (ghz * 1e9));
    }
  };
  run(std::integral_constant<int, 1>{});
  run(std::integral_constant<int, 2>{});
  run(std::integral_constant<int, 4>{});
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    fprintf(stderr, "mma_rate: %s\n", cudaGetErrorString(err));
    return 1;
  }
  return 0;
}
