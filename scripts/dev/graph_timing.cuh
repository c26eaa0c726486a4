// Shared by the dev measurements in this folder (gemm_algos.cu, gemm_batch_pad.cu, gru_step.cu,
// step_pdl.cu, step_prefetch.cu, l2_window.cu), not part of the build: CHECK, which exits with the
// failing call's file and line; blas_stream, a non-blocking stream with a cuBLAS handle on it;
// all_valid_lengths, device lengths for the step kernels; and graph_us, which times a call as the
// layers replay their steps (kCalls captured into one CUDA graph, the median of 5 replays).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define CHECK(x)                                                                       \
  do {                                                                                 \
    auto e = (x);                                                                      \
    if (static_cast<int>(e) != 0) {                                                    \
      std::fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x, (int)e); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

constexpr int kCalls = 200;

struct BlasStream {
  cudaStream_t stream;
  cublasHandle_t blas;  // on `stream`
};

inline BlasStream blas_stream() {
  BlasStream b;
  CHECK(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
  CHECK(cublasCreate(&b.blas));
  CHECK(cublasSetStream(b.blas, b.stream));
  return b;
}

// Device lengths {n}, every row valid at every step a measurement runs.
inline int* all_valid_lengths(int n) {
  int* lengths;
  CHECK(cudaMalloc(&lengths, n * sizeof(int)));
  const std::vector<int> len(n, 1 << 20);
  CHECK(cudaMemcpy(lengths, len.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  return lengths;
}

// Microseconds a call, `call` captured kCalls times into one graph, median of 5 replays.
// `edit`, where given, sees the captured graph before it is instantiated.
float graph_us(cudaStream_t s, const std::function<bool()>& call,
               const std::function<void(cudaGraph_t)>& edit = {}) {
  cudaGraph_t g;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  bool ok = true;
  for (int i = 0; i < kCalls && ok; ++i) ok = call();
  CHECK(cudaStreamEndCapture(s, &g));
  if (!ok) {
    cudaGraphDestroy(g);
    return -1.0f;
  }
  if (edit) edit(g);
  cudaGraphExec_t ge;
  CHECK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  CHECK(cudaGraphLaunch(ge, s));
  std::vector<float> t;
  for (int r = 0; r < 5; ++r) {
    CHECK(cudaEventRecord(a, s));
    CHECK(cudaGraphLaunch(ge, s));
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.0f / kCalls);
  }
  std::sort(t.begin(), t.end());
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return t[2];
}
