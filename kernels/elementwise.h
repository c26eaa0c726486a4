// Elementwise and small reduction kernels shared by the GPU layers. Each has a CPU reference with
// the same contract (named beside each one) and a test in tests/kernels/elementwise_test.cpp.
// All run on the given stream and return without waiting.
//
//   ds2::kernels::clipped_relu(x, y, n, 20.0f, ctx.stream());
//   ds2::kernels::zero_padding(seq, T, B, F, device_lengths, ctx.stream());
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ds2::kernels {

// x[i] = value.
void fill(float* x, int64_t n, float value, cudaStream_t stream);
// x[i] *= alpha.
void scale(float* x, int64_t n, float alpha, cudaStream_t stream);
// y[i] += alpha * x[i].
void axpy(float* y, const float* x, int64_t n, float alpha, cudaStream_t stream);
// y[r * ld_y + c] += x[r * ld_x + c] for r < rows, c < cols: a result computed at padded
// dimensions added into its unpadded place.
void add_rows(float* y, int ld_y, const float* x, int ld_x, int64_t rows, int cols,
              cudaStream_t stream);

// Rows t*B+b with t >= lengths[b] of a {T, B, frame} array set to zero (nn/sequences.h's
// zero_padding). `lengths` is a device array of B ints.
void zero_padding(float* data, int T, int B, int64_t frame, const int* lengths,
                  cudaStream_t stream);

// y = min(max(x, 0), clip), x and y may alias (nn/activations.h clipped_relu).
void clipped_relu(const float* x, float* y, int64_t n, float clip, cudaStream_t stream);
// dx = dy where 0 < y < clip else 0, dy and dx may alias (clipped_relu_backward).
void clipped_relu_backward(const float* y, const float* dy, float* dx, int64_t n, float clip,
                           cudaStream_t stream);

// y[r, c] += bias[c] for a row-major {rows, cols} array.
void add_row_bias(float* y, const float* bias, int64_t rows, int cols, cudaStream_t stream);
// out[c] (+)= sum_r x[r, c]: the bias gradient of add_row_bias. Sums in a fixed order
// (deterministic run to run). Overwrites `out` unless `accumulate`.
void column_sum(const float* x, int64_t rows, int cols, float* out, bool accumulate,
                cudaStream_t stream);

// *out = sum_i x[i]^2 in double, in a fixed order (two passes over kSumSquaresPartials blocks, so
// the result is the same run to run). `scratch` holds kSumSquaresPartials device doubles; `out`
// is one device double.
constexpr int kSumSquaresPartials = 512;
void sum_squares(const float* x, int64_t n, double* scratch, double* out, cudaStream_t stream);

// Inverted dropout with a counter-based hash (reproducible from seed and call index, and
// independent of launch shape): keep[i] = hash(seed, i) >= p; y = x * keep / (1-p). `mask`
// receives keep / (1-p) (0 or 1/(1-p)) for the backward, which is dx = dy * mask.
void dropout_forward(const float* x, float* y, float* mask, int64_t n, float p, uint64_t seed,
                     cudaStream_t stream);
// Exchanges a[i] and b[i].
void swap(float* a, float* b, int64_t n, cudaStream_t stream);
// y[i] = a[i] * b[i].
void multiply(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream);
// y[i] = mask[i] ? x[i] : 0 (a select, so a masked NaN becomes 0 too); x and y may alias. The
// pruning masks of train/pruning.h (CPU reference: apply_weight_masks).
void apply_mask(const float* x, const uint8_t* mask, float* y, int64_t n, cudaStream_t stream);

// y[i] = bf16(x[i]) rounded to nearest even, as 16-bit words (core/bf16.h's float_to_bf16).
void to_bf16(const float* x, uint16_t* y, int64_t n, cudaStream_t stream);
// The rows of x {rows, cols} rounded as to_bf16 into y, whose rows are ld_y >= cols apart; the
// padding columns [cols, ld_y) are set to 0. For GEMM operands that cuBLAS then reads with the
// summed or output dimension padded (kernels/rnn.h's rnn_padded_ld).
void to_bf16_rows(const float* x, int64_t rows, int cols, uint16_t* y, int ld_y,
                  cudaStream_t stream);
// y[i] = float(x[i]) (core/bf16.h's bf16_to_float).
void from_bf16(const uint16_t* x, float* y, int64_t n, cudaStream_t stream);

}  // namespace ds2::kernels
