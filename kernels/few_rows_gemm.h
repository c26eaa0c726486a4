// C = beta C + A W^T for A of few rows (a batch, m <= 16) and a wide W, on bf16 operands with fp32
// sums: the GEMM recurrence's product a timestep (nn/cuda/gemm_recurrence.h), where cuBLAS's
// kernels for 8-32 rows read U at a third of the bandwidth. W's rows are spread over CTAs of 64
// rows, and K is split so that there are about two CTAs an SM; the last CTA of a row tile to
// finish sums the splits' partial products in split order (deterministic, no atomics on values).
// The CPU reference is core/blas.h's gemm on the operands widened to fp32.
//
//   const kernels::FewRowsGemm g(m, n, k, sm_count);
//   if (g.supported(a, lda, w)) {
//     workspace.reserve(g.workspace_floats());   // counters zeroed once: kernels::few_rows_gemm_
//     kernels::few_rows_gemm_bf16(g, a, lda, w, beta, c, ldc, workspace, counters, stream);
//   }
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ds2::kernels {

constexpr int kFewRowsMax = 16;         // rows of A (and C) one call takes
constexpr int kFewRowsTileRows = 64;    // rows of W a CTA multiplies
constexpr int kFewRowsSplitMinK = 256;  // the shortest K range a split gets

// The launch shape of one product: row tiles of W and K splits.
struct FewRowsGemm {
  FewRowsGemm(int m, int n, int k, int sm_count);
  int m, n, k;
  int tiles;        // CTAs along W's rows
  int splits;       // CTAs along K
  int k_per_split;  // a multiple of 32
  // Whether this kernel takes the product: 1 <= m <= kFewRowsMax, k and lda multiples of 8, a and w
  // 16-byte aligned (else the caller runs cuBLAS).
  bool supported(const uint16_t* a, int lda, const uint16_t* w) const;
  // fp32 partial products of the splits (0 with one split).
  int64_t workspace_floats() const;
  // Completion counters, one per row tile: zero before the first call, and the kernel leaves
  // them zero.
  int counters() const { return tiles; }
};

// C[i, j] = beta C[i, j] + sum_l A[i, l] W[j, l] for i < m, j < n (bf16 A {m, lda} and W {n, k}
// as 16-bit words, fp32 C {m, ldc}); beta 0 does not read C. `workspace` holds
// workspace_floats(), `counters` counters() zeroed ints (kept zero). Calls that share a workspace
// must be ordered (one stream).
void few_rows_gemm_bf16(const FewRowsGemm& g, const uint16_t* a, int lda, const uint16_t* w,
                        float beta, float* c, int ldc, float* workspace, int* counters,
                        cudaStream_t stream);

// y {cols, rows} = x {rows, cols} transposed and rounded to bf16 (nearest even, core/bf16.h):
// the W of a product by x rather than by its transpose.
void to_bf16_transposed(const float* x, int rows, int cols, uint16_t* y, cudaStream_t stream);

}  // namespace ds2::kernels
