// The latencies a persistent RNN step is made of, measured on the GPU it runs on: how long one
// SM's store takes to be seen by another SM's polling load (the tagged exchange's critical path),
// and the round trip of one dependent L2 load of each flavour the kernels use. A developer's
// measurement for kernels/NOTES.md, not part of ds2 (the kernels never depend on it).
//
//   scripts/dev/exchange-latency.sh          # builds with nvcc and prints the table
//
// Ping-pong: CTA 0 stores i to `ping` and polls `pong` until it reads i; CTA 1 polls `ping` and
// answers on `pong`. One round is two store-to-load hand-overs, so a hand-over is the round's
// time / 2. The two words sit in different 128-byte lines; the pair is moved through the buffer
// to see whether its place (its L2 slice) matters. CTAs are pinned one per SM by their shared
// memory. Pointer chase: one thread follows a random cycle through a buffer that fits in L2,
// so every load waits for the one before it.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "core/cuda/check.h"  // DS2_CUDA_CHECK (header-only use: throws ds2::Error)

enum Flavour { kRelaxedGpu = 0, kAcquireGpu = 1, kVolatile = 2, kCg = 3 };

__device__ __forceinline__ uint32_t load(const uint32_t* p, int flavour) {
  uint32_t v;
  if (flavour == kRelaxedGpu)
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  else if (flavour == kAcquireGpu)
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  else if (flavour == kVolatile)
    asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  else
    asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void store(uint32_t* p, uint32_t v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Launched with one CTA per SM (their shared memory pins them); CTA 0 and CTA `partner` play.
__global__ void ping_pong(uint32_t* ping, uint32_t* pong, int rounds, int flavour, int partner,
                          unsigned long long* ns, int* sm) {
  if (threadIdx.x != 0 || (blockIdx.x != 0 && blockIdx.x != partner)) return;
  uint32_t id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  sm[blockIdx.x == 0 ? 0 : 1] = static_cast<int>(id);
  unsigned long long t0 = 0, t1 = 0;
  if (blockIdx.x == 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (int i = 1; i <= rounds; ++i) {
      store(ping, i);
      while (load(pong, flavour) != static_cast<uint32_t>(i)) {
      }
    }
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    *ns = t1 - t0;
  } else {
    for (int i = 1; i <= rounds; ++i) {
      while (load(ping, flavour) != static_cast<uint32_t>(i)) {
      }
      store(pong, i);
    }
  }
}

__global__ void chase(const uint32_t* next, int steps, int flavour, unsigned long long* cycles,
                      uint32_t* sink) {
  uint32_t i = 0;
  for (int s = 0; s < 1000; ++s) i = load(next + i, flavour);  // warm the path
  const long long c0 = clock64();
  for (int s = 0; s < steps; ++s) i = load(next + i, flavour);
  *cycles = clock64() - c0;
  *sink = i;
}

int main() try {
  cudaDeviceProp prop{};
  DS2_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int clock_khz = 0;
  DS2_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  std::printf("%s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20);
  const char* names[] = {"ld.relaxed.gpu", "ld.acquire.gpu", "ld.volatile", "ld.global.cg"};

  // Ping-pong at 8 places, 64 KB apart.
  const int rounds = 20000, places = 8;
  const size_t stride = 64 << 10;
  uint32_t* buf = nullptr;
  DS2_CUDA_CHECK(cudaMalloc(&buf, stride * places + 4096));
  unsigned long long* ns = nullptr;
  int* sm = nullptr;
  DS2_CUDA_CHECK(cudaMalloc(&ns, sizeof(*ns)));
  DS2_CUDA_CHECK(cudaMalloc(&sm, 2 * sizeof(int)));
  const int pin = static_cast<int>(prop.sharedMemPerBlockOptin);
  DS2_CUDA_CHECK(cudaFuncSetAttribute(ping_pong, cudaFuncAttributeMaxDynamicSharedMemorySize, pin));
  const int ctas = prop.multiProcessorCount;
  std::printf(
      "\nstore (st.relaxed.gpu) to polling load on another SM, ns per hand-over, at 8 "
      "places 64 KB apart:\n");
  for (int f : {kRelaxedGpu, kAcquireGpu, kVolatile}) {
    for (int partner : {1, ctas / 4, ctas / 2, ctas - 1}) {
      std::vector<double> per;
      int sms[2] = {0, 0};
      for (int p = 0; p < places; ++p) {
        uint32_t* ping = buf + p * stride / 4;
        uint32_t* pong = ping + 32;  // the next 128-byte line
        DS2_CUDA_CHECK(cudaMemset(buf, 0, stride * places + 4096));
        ping_pong<<<ctas, 32, pin>>>(ping, pong, rounds, f, partner, ns, sm);
        DS2_CUDA_CHECK(cudaGetLastError());
        unsigned long long t = 0;
        DS2_CUDA_CHECK(cudaMemcpy(&t, ns, sizeof(t), cudaMemcpyDeviceToHost));
        DS2_CUDA_CHECK(cudaMemcpy(sms, sm, sizeof(sms), cudaMemcpyDeviceToHost));
        per.push_back(double(t) / (2.0 * rounds));
      }
      std::printf("  %-15s SM %3d <-> SM %3d:", names[f], sms[0], sms[1]);
      for (double v : per) std::printf(" %5.0f", v);
      std::printf("\n");
    }
  }

  // Pointer chase through 4 MB (in L2), one random cycle of 128-byte lines.
  const int lines = (4 << 20) / 128, steps = 20000;
  std::vector<uint32_t> order(lines);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin() + 1, order.end(), std::mt19937(7));
  std::vector<uint32_t> next(size_t(lines) * 32, 0);
  for (int i = 0; i < lines; ++i) next[size_t(order[i]) * 32] = order[(i + 1) % lines] * 32;
  uint32_t *dnext = nullptr, *sink = nullptr;
  unsigned long long* cyc = nullptr;
  DS2_CUDA_CHECK(cudaMalloc(&dnext, next.size() * 4));
  DS2_CUDA_CHECK(cudaMalloc(&sink, 4));
  DS2_CUDA_CHECK(cudaMalloc(&cyc, sizeof(*cyc)));
  DS2_CUDA_CHECK(cudaMemcpy(dnext, next.data(), next.size() * 4, cudaMemcpyHostToDevice));
  std::printf("\ndependent load round trip, 4 MB working set (L2), one thread:\n");
  for (int f : {kCg, kRelaxedGpu, kAcquireGpu, kVolatile}) {
    chase<<<1, 1>>>(dnext, steps, f, cyc, sink);
    DS2_CUDA_CHECK(cudaGetLastError());
    unsigned long long c = 0;
    DS2_CUDA_CHECK(cudaMemcpy(&c, cyc, sizeof(c), cudaMemcpyDeviceToHost));
    const double per = double(c) / steps;
    std::printf("  %-15s %6.0f cycles = %5.0f ns at %d MHz\n", names[f], per,
                per / (clock_khz / 1e6), clock_khz / 1000);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
