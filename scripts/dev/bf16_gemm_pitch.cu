// Times cuBLAS's bf16 GEMM (cublasGemmEx, fp32 accumulation and output, CUBLAS_GEMM_DEFAULT, on a
// handle set up as core/cuda/context.cpp's: 32 MiB workspace, no atomics) on the products of one
// bf16 GRU layer that runs the GEMM recurrence, at H 1700 (not a multiple of 8) and 1704, to find
// which of them sends cuBLAS to slow kernels and whether padding a dimension to a multiple of 8
// avoids it. Row-major as core/cuda/gemm.h: C {m, n} = op(A) op(B), op(A) {m, k}, op(B) {k, n}.
//   scripts/dev/bf16-gemm-pitch.sh        # on the GPU machine
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                    \
  do {                                                              \
    if ((x) != 0) {                                                 \
      std::fprintf(stderr, "%s failed at line %d\n", #x, __LINE__); \
      std::exit(1);                                                 \
    }                                                               \
  } while (0)

namespace {

struct Form {
  const char* name;
  bool trans_a, trans_b;
  int m, n, k;
  float beta;
};

int pad8(int x) {
  return (x + 7) / 8 * 8;
}

// us a call over 200 calls after 20, captured in a CUDA graph as the layer runs them (no host
// overhead in the time). `pad_n` / `pad_k`: that dimension and the row pitches rounded up to 8.
float us_per_call(cublasHandle_t h, cudaStream_t s, const Form& f, bool pad_n, bool pad_k,
                  const void* a, const void* b, float* c) {
  const int n = pad_n ? pad8(f.n) : f.n, k = pad_k ? pad8(f.k) : f.k, m = f.m;
  // Stored shapes: A {m, k} or {k, m}; B {k, n} or {n, k}; C {m, n}.
  const int lda = f.trans_a ? m : k, ldb = f.trans_b ? k : n, ldc = n;
  const float one = 1.0f;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < 20; ++i)
    CHECK(cublasGemmEx(h, f.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                       f.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &one, b, CUDA_R_16BF, ldb, a,
                       CUDA_R_16BF, lda, &f.beta, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT));
  CHECK(cudaStreamEndCapture(s, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphLaunch(exec, s));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  CHECK(cudaEventRecord(e0, s));
  for (int i = 0; i < 10; ++i) CHECK(cudaGraphLaunch(exec, s));
  CHECK(cudaEventRecord(e1, s));
  CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  return 1e3f * ms / 200;
}

}  // namespace

int main() {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void *a, *b, *work;
  float* c;
  const size_t big = size_t{256} << 20;
  CHECK(cudaMalloc(&a, big));
  CHECK(cudaMalloc(&b, big));
  CHECK(cudaMalloc(&c, big));
  CHECK(cudaMalloc(&work, size_t{32} << 20));
  CHECK(cudaMemset(a, 0, big));
  CHECK(cudaMemset(b, 0, big));
  CHECK(cudaMemset(c, 0, big));
  cublasHandle_t h;
  CHECK(cublasCreate(&h));
  CHECK(cublasSetStream(h, s));
  CHECK(cublasSetWorkspace(h, work, size_t{32} << 20));
  CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  CHECK(cublasSetAtomicsMode(h, CUBLAS_ATOMICS_NOT_ALLOWED));
  std::printf("bf16 GEMM in a CUDA graph, us a call; +N / +K: that dimension padded to 8\n");
  const int rows = 3200;  // T * B: 200 output frames of batch 16
  for (int H : {1700, 1704, 1100, 1104})
    for (const Form f : {Form{"step fwd  g = h U^T", false, true, 16, 3 * H, H, 0.0f},
                         Form{"step bwd  next += dG U", false, false, 16, H, 3 * H, 1.0f},
                         Form{"dU += dG^T H", true, false, 3 * H, H, rows, 1.0f},
                         Form{"proj = X W^T", false, true, rows, 3 * H, H, 0.0f},
                         Form{"dW += dA^T X", true, false, 3 * H, H, rows, 1.0f},
                         Form{"dX = dA W", false, false, rows, H, 3 * H, 0.0f}}) {
      std::printf("H %d %-24s m %5d n %5d k %5d: %7.2f | +N %7.2f | +K %7.2f | +N+K %7.2f\n", H,
                  f.name, f.m, f.n, f.k, us_per_call(h, s, f, false, false, a, b, c),
                  us_per_call(h, s, f, true, false, a, b, c),
                  us_per_call(h, s, f, false, true, a, b, c),
                  us_per_call(h, s, f, true, true, a, b, c));
    }
  return 0;
}
