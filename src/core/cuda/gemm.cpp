#include "core/cuda/gemm.h"

#include "core/cuda/check.h"

namespace ds2 {

namespace {

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS gets the operands
// swapped (here and in the fp32 call below).
void gemm_ex(cublasHandle_t handle, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
             const void* a, int lda, const void* b, int ldb, cudaDataType operand_type, float beta,
             float* c, int ldc, cublasComputeType_t compute) {
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  DS2_CUBLAS_CHECK(cublasGemmEx(handle, op_b, op_a, n, m, k, &alpha, b, operand_type, ldb, a,
                                operand_type, lda, &beta, c, CUDA_R_32F, ldc, compute,
                                CUBLAS_GEMM_DEFAULT));
}

}  // namespace

void gemm(cublasHandle_t handle, Precision precision, bool trans_a, bool trans_b, int m, int n,
          int k, float alpha, const float* a, int lda, const float* b, int ldb, float beta,
          float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  if (precision == Precision::kFp32) {
    const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    DS2_CUBLAS_CHECK(
        cublasSgemm(handle, op_b, op_a, n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
    return;
  }
  gemm_ex(handle, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, CUDA_R_32F, beta, c, ldc,
          CUBLAS_COMPUTE_32F_FAST_16BF);
}

void gemm_bf16(cublasHandle_t handle, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
               const uint16_t* a, int lda, const uint16_t* b, int ldb, float beta, float* c,
               int ldc) {
  if (m <= 0 || n <= 0) return;
  gemm_ex(handle, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, CUDA_R_16BF, beta, c, ldc,
          CUBLAS_COMPUTE_32F);
}

void gemm(const CudaContext& ctx, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
          const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  gemm(ctx.cublas(), ctx.matmul_precision(), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
       c, ldc);
}

}  // namespace ds2
