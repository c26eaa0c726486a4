#include "core/cuda/gemm.h"

#include "core/cuda/check.h"

namespace ds2 {

void gemm(cublasHandle_t handle, Precision precision, bool trans_a, bool trans_b, int m, int n,
          int k, float alpha, const float* a, int lda, const float* b, int ldb, float beta,
          float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (precision == Precision::kFp32) {
    DS2_CUBLAS_CHECK(
        cublasSgemm(handle, op_b, op_a, n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
    return;
  }
  DS2_CUBLAS_CHECK(cublasGemmEx(handle, op_b, op_a, n, m, k, &alpha, b, CUDA_R_32F, ldb, a,
                                CUDA_R_32F, lda, &beta, c, CUDA_R_32F, ldc,
                                CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT));
}

void gemm_bf16(cublasHandle_t handle, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
               const uint16_t* a, int lda, const uint16_t* b, int ldb, float beta, float* c,
               int ldc) {
  if (m <= 0 || n <= 0) return;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  DS2_CUBLAS_CHECK(cublasGemmEx(handle, op_b, op_a, n, m, k, &alpha, b, CUDA_R_16BF, ldb, a,
                                CUDA_R_16BF, lda, &beta, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
}

void gemm(const CudaContext& ctx, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
          const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  gemm(ctx.cublas(), ctx.matmul_precision(), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
       c, ldc);
}

}  // namespace ds2
