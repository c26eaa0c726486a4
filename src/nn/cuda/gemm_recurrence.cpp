#include "nn/cuda/gemm_recurrence.h"

#include <algorithm>

#include "core/cuda/check.h"
#include "core/cuda/device_query.h"
#include "core/cuda/gemm.h"
#include "core/error.h"
#include "kernels/elementwise.h"
#include "kernels/rnn.h"
#include "kernels/rnn_fused_step.h"

namespace ds2 {

namespace {

// C {rows, n} (+)= A {rows, k} op(U): in fp32 on the fp32 arrays (A's rows lda apart), in bf16
// on their rounded copies, whose rows are kernels::rnn_padded_ld(k) apart with zero padding, as
// are U's rows and columns: the bf16 GEMM runs k padded to a multiple of 8, and n too where
// `pad_n` (C then has rnn_padded_ld(n) columns; the padding ones receive zeros, plus C's own
// where beta is 1).
void recurrent_gemm(const GemmRecurrence& r, bool trans_u, int rows, int n, int k, const float* a,
                    const uint16_t* a_bf16, int lda, float beta, float* c, int ldc, bool pad_n) {
  if (r.bf16()) {
    const int k16 = kernels::rnn_padded_ld(k);
    gemm_bf16(r.blas, false, trans_u, rows, pad_n ? kernels::rnn_padded_ld(n) : n, k16, 1.0f,
              a_bf16, k16, r.u_bf16, kernels::rnn_padded_ld(r.hidden), beta, c, ldc);
  } else {
    gemm(r.blas, Precision::kFp32, false, trans_u, rows, n, k, 1.0f, a, lda, r.u, r.hidden, beta, c,
         ldc);
  }
}

// What a step kernel prefetches: `next` where gemm_recurrence_prefetches on the current device,
// else nothing. (Host queries, no sync; the layers run their steps captured into graphs.)
kernels::RnnStepPrefetch prefetched(const GemmRecurrence& r, int gates,
                                    const kernels::RnnStepPrefetch& next) {
  int device = 0;
  DS2_CUDA_CHECK(cudaGetDevice(&device));
  const int64_t l2_bytes = device_attribute(cudaDevAttrL2CacheSize, device);
  return gemm_recurrence_prefetches(gates, r.hidden, r.bf16(), l2_bytes)
             ? next
             : kernels::RnnStepPrefetch{};
}

}  // namespace

int64_t recurrent_weight_bf16_size(int gates, int hidden) {
  return int64_t{kernels::rnn_padded_ld(gates * hidden)} * kernels::rnn_padded_ld(hidden);
}

void round_recurrent_weight(const float* u, int gates, int hidden, uint16_t* out,
                            cudaStream_t stream) {
  const int ld = kernels::rnn_padded_ld(hidden);
  const int64_t rows = int64_t{gates} * hidden;
  kernels::to_bf16_rows(u, rows, hidden, out, ld, stream);
  const int64_t padding_rows = kernels::rnn_padded_ld(gates * hidden) - rows;
  if (padding_rows > 0)
    DS2_CUDA_CHECK(
        cudaMemsetAsync(out + rows * ld, 0, sizeof(uint16_t) * padding_rows * ld, stream));
}

bool gemm_recurrence_prefetches(int gates, int hidden, bool bf16, int64_t l2_bytes) {
  const int64_t u_bytes = bf16 ? recurrent_weight_bf16_size(gates, hidden) * int64_t{2}
                               : int64_t{gates} * hidden * hidden * int64_t{4};
  return 2 * u_bytes <= l2_bytes;
}

namespace {

int round_up(int n, int multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// bf16 clipped ReLU, both passes: 25 for steps of 17-24 rows where U's padded side is 2304-2560
// (below); 64 for steps of 24-63 rows where it is 3072-4096, or 2688-3071 at a multiple of 8
// rows (session 73). cuBLAS's default kernel at the smaller N ran up to 1.25x
// slower there than at N 64 (session 73, us a forward product: H 4096 N 48 10.52 against 8.45 at
// 64, H 3072 7.72 against 6.80, H 2816 6.79 against 6.40). At H 2304-2560, and at H 2688-2816 for
// most N not a multiple of 8, N 64 was the slower one; at H 4608 much slower (N 24 backward-data
// 10.57 against 14.66), at H 5120-6144 level.
// Session 75, every N 1-64 (`gemm-batch-pad.sh relu bf16 dense H...`, us a product): at H
// 2304-2560 cuBLAS serves N 17-24 1.15-1.34x slower than N 25, both passes (H 2560 forward N 17
// 7.69, N 24 6.64, N 25 5.76; H 2432, not among the sizes the rule was read from, 7.19-7.37
// against 5.67); and at H 4608-4864 the forward's N 57-63 1.39-1.50x slower than N 64 (H 4864
// 17.91 against 11.97; level at H 4352 and 5120).
int relu_bf16_rows(int rows, int h16) {
  constexpr int kPaddedRows = 64;
  if (h16 >= 2304 && h16 <= 2560 && rows >= 17 && rows <= 24) return 25;
  if (rows < 24 || rows >= kPaddedRows || h16 > 4096) return rows;
  return h16 >= 3072 || (h16 >= 2688 && rows % 8 == 0) ? kPaddedRows : rows;
}

int relu_bf16_forward_rows(int rows, int h16) {
  if (h16 >= 4608 && h16 <= 4864 && rows >= 57 && rows < 64) return 64;
  return relu_bf16_rows(rows, h16);
}

// bf16 GRU forward: rows rounded up to a multiple of 8 at U's padded side 1280-2304. Session 75,
// every N 1-64 (`gemm-batch-pad.sh gru bf16 dense H...`): the geometric mean over N 1.01-1.08x
// at H 1296-2304 (H 1536 N 41-47 6.0-6.2 us against 5.03 at 48, N 1-2 1.12-1.16x), the worst N
// 0.94-1.00x; at H 1104 level (1.006), and backward-data lost (H 1296 N 41 0.74x).
int gru_bf16_forward_rows(int rows, int h16) {
  if (h16 < 1280 || h16 > 2304 || rows >= 64) return rows;
  return round_up(rows, 8);
}

// The fused bf16 clipped-ReLU forward step (kernels/rnn_fused_step.h) replaces the GEMM and step
// kernel past this padded H (gemm_recurrence.h has the numbers). At H 4096 the walk measured 8.39
// against 10.54 at batch 8 too, but the layers run the persistent kernel there.
constexpr int kFusedStepMinHidden = 4096;

// fp32 (cuBLAS's SGEMM, no TF32): its default kernel changes at N 4, 9, 12-14, 17 and 33, and
// at some H the kernel for the smaller N is up to 2x slower than that for N 17. Session 75, every
// N 1-64 at H 2560-8192 (ReLU) and 512-3072 (GRU), us a product, N as is against padded:
// - clipped ReLU forward, H 2560-5120: N 3 against 4 1.31-1.66x (H 4096 45.20 / 27.75); N 11-16
//   against 17 1.05-1.36x (H 5120 N 11 90.54 / 66.60, N 16 77.07); N 9-10 from H 3328 1.06-1.14x
//   (at H 2816-3072 N 9-10 ran faster as is). At H 6144-8192 other N won: not padded.
// - clipped ReLU backward-data: N 2-16 against 17 at H 3840-6144, 1.05-2.04x (H 4096 N 2 63.76 /
//   38.70, N 14 79.06, N 9 40.93; H 6144 N 12 123.76 / 69.33); N 15-16 at H 3072-3839 and N 14
//   from H 3328, 1.58-2.02x (H 3072 N 16 53.99 / 26.71). At H 8192 N 17 was the slow one.
// - GRU forward, H 2048-3072: N 7-16 against 17 1.0-1.46x (H 2560 N 12 73.46 / 50.23).
// - GRU backward-data, H 2560-3072: N 2-16 against 17 1.11-1.88x (H 3072 N 2 93.04 / 59.57);
//   at H 2048 N 17 was slower than N 14-16.
int fp32_rows(int rows, int gates, int H, bool backward) {
  constexpr int kRows = 17;
  if (gates == 1 && !backward) {
    if (H < 2560 || H > 5120) return rows;
    if (rows == 3) return 4;
    if ((rows >= 11 && rows <= 16) || (H >= 3328 && (rows == 9 || rows == 10))) return kRows;
    return rows;
  }
  if (gates == 1) {
    if (H >= 3840 && H <= 6144 && rows >= 2 && rows <= 16) return kRows;
    if (H >= 3072 && H < 3840 && rows >= (H >= 3328 ? 14 : 15) && rows <= 16) return kRows;
    return rows;
  }
  if (!backward) return H >= 2048 && H <= 3072 && rows >= 7 && rows <= 16 ? kRows : rows;
  return H >= 2560 && H <= 3072 && rows >= 2 && rows <= 16 ? kRows : rows;
}

}  // namespace

bool gemm_recurrence_fuses_relu_forward(int B, int hidden, bool bf16) {
  return bf16 && kernels::rnn_relu_fused_step_fits(B) &&
         kernels::rnn_padded_ld(hidden) > kFusedStepMinHidden;
}

int gemm_recurrence_gemm_rows(int rows, int gates, int hidden, bool bf16, bool backward) {
  if (!bf16) return fp32_rows(rows, gates, hidden, backward);
  const int h16 = kernels::rnn_padded_ld(hidden);
  if (gates == 1) return backward ? relu_bf16_rows(rows, h16) : relu_bf16_forward_rows(rows, h16);
  return backward ? rows : gru_bf16_forward_rows(rows, h16);
}

int gemm_recurrence_row_capacity(int B, int gates, int hidden, bool bf16) {
  // Not monotone in `rows` (some rules pad only some N): the most over every step's rows.
  int capacity = B;
  for (int rows = 1; rows <= std::min(B, 64); ++rows)
    for (const bool backward : {false, true})
      capacity = std::max(capacity, gemm_recurrence_gemm_rows(rows, gates, hidden, bf16, backward));
  return capacity;
}

int gemm_recurrence_extra_rows(int B, int gates, int hidden, bool bf16) {
  return gemm_recurrence_row_capacity(B, gates, hidden, bf16) - B;
}

int64_t gemm_recurrence_carry_size(int B, int gates, int hidden, bool bf16) {
  return int64_t{gemm_recurrence_row_capacity(B, gates, hidden, bf16)} *
         kernels::rnn_padded_ld(hidden);
}

GemmRecurrenceBf16::GemmRecurrenceBf16(bool bf16, const float* u, int gates, int hidden, int T,
                                       int B, cudaStream_t stream)
    : bf16_(bf16), T_(T), row_(int64_t{B} * kernels::rnn_padded_ld(hidden)) {
  const int64_t h16 = kernels::rnn_padded_ld(hidden);
  const int64_t extra_rows = gemm_recurrence_extra_rows(B, gates, hidden, bf16);
  // A padded step may stay within B rows (3 as 4 of 4): every clipped ReLU gets a product.
  if (gates == 1) product_.reserve(std::max<int64_t>(1, (B + extra_rows) * h16));
  if (!bf16) return;
  u_.reserve(recurrent_weight_bf16_size(gates, hidden));
  states_.reserve(std::max<int64_t>(1, T * row_ + extra_rows * h16));
  zero_.reserve(std::max<int64_t>(1, row_ + extra_rows * h16));
  step_grad_.reserve(
      std::max<int64_t>(1, (B + extra_rows) * int64_t{kernels::rnn_padded_ld(gates * hidden)}));
  round_recurrent_weight(u, gates, hidden, u_.data(), stream);
  DS2_CUDA_CHECK(cudaMemsetAsync(zero_.data(), 0, sizeof(uint16_t) * zero_.capacity(), stream));
}

void relu_gemm_step_forward(const GemmRecurrence& r, int t, int rows, const float* h_prev,
                            const uint16_t* h_prev_bf16, float* p, int ld_p, float* h,
                            uint16_t* h_bf16, float clip, const kernels::RnnStepPrefetch& next) {
  const int H = r.hidden;
  if (gemm_recurrence_fuses_relu_forward(r.batch, H, r.bf16())) {
    // Every row of the batch (the invalid ones' h is 0 either way); U streamed once, no GEMM.
    kernels::rnn_relu_fused_step_forward(r.u_bf16, H, h_prev_bf16, p, ld_p, h, h_bf16, r.batch, t,
                                         r.lengths, clip, r.stream);
    return;
  }
  const int gemm_rows = gemm_recurrence_gemm_rows(rows, 1, H, r.bf16(), false);
  uint16_t* state16 = r.bf16() ? h_bf16 : nullptr;
  const int ld16 = kernels::rnn_padded_ld(H);
  // bf16 at H not a multiple of 8: N padded too, which p cannot take (its columns past H are the
  // other direction's), so the product goes to `product`. cuBLAS's bf16 kernels at the unpadded N
  // ran the step 1.3x slower (H 4100 batch 8, seven layers, 113.00 ms a step against H 4104's
  // 87.59; session 65).
  const bool pad_n = r.bf16() && ld16 != H;
  if (gemm_rows > rows || pad_n) {
    // p's rows past B belong to other steps: the padded GEMM writes `product` instead.
    DS2_CHECK(r.product, "the GEMM recurrence runs " << gemm_rows << " rows at H " << H
                                                     << " but was given no product array");
    recurrent_gemm(r, true, gemm_rows, H, H, h_prev, h_prev_bf16, H, 0.0f, r.product, ld16, pad_n);
    kernels::rnn_relu_step_forward(p, ld_p, r.product, ld16, h, state16, r.batch, H, t, r.lengths,
                                   clip, prefetched(r, 1, next), r.stream);
    return;
  }
  recurrent_gemm(r, true, rows, H, H, h_prev, h_prev_bf16, H, 1.0f, p, ld_p, false);
  kernels::rnn_relu_step_forward(p, ld_p, nullptr, 0, h, state16, r.batch, H, t, r.lengths, clip,
                                 prefetched(r, 1, next), r.stream);
}

void relu_gemm_step_backward(const GemmRecurrence& r, int t, int rows, const float* h,
                             const float* dy, const float* carry, float* dp, int ld_p,
                             uint16_t* dp_bf16, float* next, float clip,
                             const kernels::RnnStepPrefetch& next_step) {
  const int H = r.hidden;
  uint16_t* dp16 = r.bf16() ? dp_bf16 : nullptr;
  kernels::rnn_relu_step_backward(h, dy, carry, dp, ld_p, dp16, next, r.batch, H, t, r.lengths,
                                  clip, prefetched(r, 1, next_step), r.stream);
  // The kernel zeroed `next` on the rows past `rows` (invalid at t); the GEMM fills the others
  // (and, padded, the capacity's rows past B, which nothing reads).
  recurrent_gemm(r, false, gemm_recurrence_gemm_rows(rows, 1, H, r.bf16(), true), H, H, dp, dp16,
                 ld_p, 0.0f, next, kernels::rnn_padded_ld(H), true);
}

void gru_gemm_step_forward(const GemmRecurrence& r, int t, int rows, const float* h_prev,
                           const uint16_t* h_prev_bf16, float* p, int ld_p, float* g,
                           const float* bias_h, float* h, uint16_t* h_bf16, float* candidate,
                           const kernels::RnnStepPrefetch& next) {
  const int H = r.hidden;
  // g has the capacity's rows: a padded GEMM writes its padding rows there, unread.
  recurrent_gemm(r, true, gemm_recurrence_gemm_rows(rows, 3, H, r.bf16(), false), 3 * H, H, h_prev,
                 h_prev_bf16, H, 0.0f, g, kernels::rnn_padded_ld(3 * H), true);
  kernels::rnn_gru_step_forward(p, ld_p, g, bias_h, h_prev, h, r.bf16() ? h_bf16 : nullptr,
                                candidate, r.batch, H, t, r.lengths, prefetched(r, 3, next),
                                r.stream);
}

void gru_gemm_step_backward(const GemmRecurrence& r, int t, int rows, const float* gates, int ld_p,
                            const float* candidate, const float* h_prev, const float* dy,
                            const float* carry, float* dp, float* dg, uint16_t* dg_bf16,
                            float* next, const kernels::RnnStepPrefetch& next_step) {
  const int H = r.hidden;
  kernels::rnn_gru_step_backward(gates, ld_p, candidate, h_prev, dy, carry, dp, dg,
                                 r.bf16() ? dg_bf16 : nullptr, next, r.batch, H, t, r.lengths,
                                 prefetched(r, 3, next_step), r.stream);
  // dL/dh_prev = dh z (from the kernel) + dG U.
  recurrent_gemm(r, false, gemm_recurrence_gemm_rows(rows, 3, H, r.bf16(), true), H, 3 * H, dg,
                 dg_bf16, 3 * H, 1.0f, next, kernels::rnn_padded_ld(H), true);
}

}  // namespace ds2
