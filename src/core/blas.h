// Thin, checked wrapper over CBLAS sgemm (OpenBLAS) for row-major matrices.
//
//   // C[M,N] = A[M,K] * B[K,N]^T ... with B stored [N,K]:
//   ds2::gemm(false, true, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
#pragma once

namespace ds2 {

// C = alpha * op(A) * op(B) + beta * C, all row-major. op(X) = X^T when trans_X.
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);

// Sets the number of BLAS threads (0 = library default).
void set_blas_threads(int threads);
int blas_threads();

}  // namespace ds2
