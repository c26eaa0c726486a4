#include "core/blas.h"

#include <cblas.h>

#include <algorithm>

#include "core/cpu_threads.h"

namespace ds2 {

namespace {

void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Blocks narrower than this cost more than they share: each block's sgemm packs the whole other
// operand again. The digits recipe's weight gradients (384 x 192 over K 8000, TN) took 0.754-0.993
// s of sgemm time in `ds2 bench step configs/fsdd.yaml --steps 3 --warmup 1` in 12 blocks of 32
// rows, 0.556-0.715 in 6 of 64 (four rounds each, 2 cores, SkylakeX kernels, summed over both
// threads: scripts/dev/sgemm-shapes.sh); 3 blocks of 128 left one thread idle a third of the time.
constexpr int kMinBlock = 64;
// A split product has this many blocks (fewer where they would be narrower than kMinBlock) at any
// thread count, the threads taking them in turn: OpenBLAS picks its kernels by shape, and on
// AVX-512 a block of 334 rows sums K in another order than one of 1001 rows, so blocks that
// followed the thread count gave each thread count its own rounding. 12 splits evenly over 2, 3,
// 4 and 6 threads.
constexpr int kBlocks = 12;

}  // namespace

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  const int64_t macs = int64_t{m} * n * k;
  const bool split_rows = m >= n;  // the longer side, so each block keeps a wide GEMM
  const int side = split_rows ? m : n;
  const int blocks = std::min(kBlocks, side / kMinBlock);
  if (macs < kGemmSplitMinMacs || blocks < 2) {
    sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const int parts = std::min(cpu_threads(), blocks);
  run_parts(parts, [&](int part) {
    for (int block = part; block < blocks; block += parts) {
      const int begin = static_cast<int>(int64_t{side} * block / blocks);
      const int end = static_cast<int>(int64_t{side} * (block + 1) / blocks);
      if (split_rows) {
        // op(A)'s rows begin..end: stored rows (no transpose) or stored columns (transposed).
        const float* a_part = trans_a ? a + begin : a + int64_t{begin} * lda;
        sgemm(trans_a, trans_b, end - begin, n, k, alpha, a_part, lda, b, ldb, beta,
              c + int64_t{begin} * ldc, ldc);
      } else {
        const float* b_part = trans_b ? b + int64_t{begin} * ldb : b + begin;
        sgemm(trans_a, trans_b, m, end - begin, k, alpha, a, lda, b_part, ldb, beta, c + begin,
              ldc);
      }
    }
  });
}

}  // namespace ds2
