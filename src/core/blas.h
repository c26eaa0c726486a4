// Thin, checked wrapper over CBLAS sgemm (OpenBLAS) for row-major matrices. A large product is
// split into row (or column) blocks run on the CPU compute threads (core/cpu_threads.h), each a
// single-threaded sgemm summing over all of K; the blocks depend on the shape only, so every
// thread count gives the same bits.
//
//   // C[M,N] = A[M,K] * B[K,N]^T ... with B stored [N,K]:
//   ds2::gemm(false, true, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
#pragma once

#include <cstdint>

namespace ds2 {

// Products of fewer multiply-adds run whole on the calling thread: splitting them would cost
// more in hand-over than it saves (a recurrent layer's one-timestep GEMM at H 192, batch 16, is
// 0.6M).
constexpr int64_t kGemmSplitMinMacs = int64_t{1} << 22;

// C = alpha * op(A) * op(B) + beta * C, all row-major. op(X) = X^T when trans_X.
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);

}  // namespace ds2
