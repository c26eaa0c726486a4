// Times cuBLAS's bf16 GEMM (cublasGemmEx, fp32 accumulation and output, CUBLAS_GEMM_DEFAULT, as
// core/cuda/gemm.cpp calls it) on the GEMM recurrence's per-step products at H not a multiple of
// 8, with the operands' row pitch and the summed dimension padded or not, to find which of them
// sends cuBLAS to its slow kernels. Row-major, as nn/cuda/gemm_recurrence.cpp: forward
// C {M, N} = A {M, K} U^T with U {N, K}; backward-data C {M, N} = A {M, K} U with U {K, N}.
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

// us a call of C {m, n} = A {m, k} op(U), over 400 calls after 50.
float us_per_call(cublasHandle_t h, bool trans_u, int m, int n, int k, int lda, int ldu,
                  const void* a, const void* u, float* c) {
  const float one = 1.0f, zero = 0.0f;
  auto call = [&] {
    // Column-major: C^T {n, m} = op(U)^T {n, k} A^T {k, m}.
    CHECK(cublasGemmEx(h, trans_u ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, u,
                       CUDA_R_16BF, ldu, a, CUDA_R_16BF, lda, &zero, c, CUDA_R_32F, n,
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  for (int i = 0; i < 50; ++i) call();
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  CHECK(cudaEventRecord(e0));
  for (int i = 0; i < 400; ++i) call();
  CHECK(cudaEventRecord(e1));
  CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  return 1e3f * ms / 400;
}

int pad8(int x) {
  return (x + 7) / 8 * 8;
}

}  // namespace

int main() {
  cublasHandle_t h;
  CHECK(cublasCreate(&h));
  void *a, *u;
  float* c;
  const size_t big = size_t{64} << 20;
  CHECK(cudaMalloc(&a, big));
  CHECK(cudaMalloc(&u, big));
  CHECK(cudaMalloc(&c, big));
  CHECK(cudaMemset(a, 0, big));
  CHECK(cudaMemset(u, 0, big));
  std::printf("bf16 GEMM, us a call: pitch = the operands' row pitch, K = the summed dimension\n");
  for (int H : {1700, 1704, 1100, 1104, 1300, 1304})
    for (int m : {16, 32}) {
      // GRU forward: N = 3H, K = H; GRU backward-data: N = H, K = 3H; ReLU forward N = K = H.
      struct Form {
        const char* name;
        bool trans_u;
        int n, k;
      };
      for (const Form f : {Form{"gru fwd", true, 3 * H, H}, Form{"gru bwd", false, H, 3 * H},
                           Form{"relu fwd", true, H, H}}) {
        // forward: A pitch = U pitch = K; backward: A pitch = K, U pitch = N.
        const int lda = f.k, ldu = f.trans_u ? f.k : f.n;
        const float base = us_per_call(h, f.trans_u, m, f.n, f.k, lda, ldu, a, u, c);
        const float pitch = us_per_call(h, f.trans_u, m, f.n, f.k, pad8(lda), pad8(ldu), a, u, c);
        const float kpad =
            us_per_call(h, f.trans_u, m, f.n, pad8(f.k), pad8(lda), pad8(ldu), a, u, c);
        const float npad =
            us_per_call(h, f.trans_u, m, pad8(f.n), pad8(f.k), pad8(lda), pad8(ldu), a, u, c);
        std::printf(
            "H %d M %2d %-8s N %5d K %5d: compact %6.2f | pitch %6.2f | +K %6.2f | +N %6.2f\n", H,
            m, f.name, f.n, f.k, base, pitch, kpad, npad);
      }
    }
  return 0;
}
