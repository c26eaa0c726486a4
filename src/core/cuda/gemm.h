// Row-major GEMM on the GPU through cuBLAS, with the same contract as core/blas.h's gemm (the CPU
// reference), queued on the context's stream.
//
//   // C[M,N] = A[M,K] * B[N,K]^T
//   ds2::gemm(ctx, false, true, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
//   ctx.set_matmul_precision(ds2::Precision::kBf16);   // mixed precision from here on
//   ds2::gemm_bf16(ctx.cublas(), false, true, M, N, K, 1.0f, A16, K, B16, K, 0.0f, C, N);
#pragma once

#include <cstdint>

#include "core/cuda/context.h"
#include "core/precision.h"

namespace ds2 {

// In ctx.matmul_precision(): fp32, or bf16 operands on tensor cores with fp32 accumulation
// (mixed precision; the fp32 arrays are rounded inside cuBLAS).
void gemm(const CudaContext& ctx, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
          const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
// The same on an explicit cuBLAS handle (for work on the side stream).
void gemm(cublasHandle_t handle, Precision precision, bool trans_a, bool trans_b, int m, int n,
          int k, float alpha, const float* a, int lda, const float* b, int ldb, float beta,
          float* c, int ldc);
// The same product with operands already rounded to bf16 (16-bit words, kernels::to_bf16), fp32
// accumulation and fp32 C: for an operand used in several products, rounded once. cuBLAS picks
// TF32 kernels for fp32 arrays under bf16 compute; these run the bf16 tensor-core kernels.
void gemm_bf16(cublasHandle_t handle, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
               const uint16_t* a, int lda, const uint16_t* b, int ldb, float beta, float* c,
               int ldc);

}  // namespace ds2
