// Sequence-wise batch normalization kernels (the GPU side of nn/batch_norm.cpp, whose BatchNorm
// is the CPU reference; tests/nn/cuda/batch_norm_cuda_test.cpp compares the two). Data is a
// time-major {T, B, C, S} block (S = 1 for {T, B, F} data, C = F); frame (t, b) is valid when
// t < lengths[b]. Statistics are per channel over the valid frames and all S positions, reduced
// in a fixed order (per-chunk double partial sums, then the chunks in order), so results are
// identical run to run. All calls queue on `stream` and return without waiting.
//
// Per-utterance statistics (dims.per_utterance; BatchNorm's NormStatistics::kUtterance): each
// utterance b is normalized by its own valid frames, and the BatchNormStats vectors hold B * C
// floats, [b * C + c]. The utterance_norm_* calls compute those statistics; the apply calls read
// them.
//
//   BatchNormDims dims{T, B, C, S};
//   DeviceArray<double> ws(kernels::batch_norm_workspace(dims));
//   kernels::batch_norm_train_stats(dims, x, lengths, valid_count, gamma, beta, 0.1f, 1e-5f,
//                                   running_mean, running_var, stats, ws.data(), stream);
//   kernels::batch_norm_apply(dims, x, y, lengths, stats.coef_a, stats.coef_b, stream);
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ds2::kernels {

struct BatchNormDims {
  int T = 0, B = 0, C = 0;
  int64_t S = 1;               // positions per channel within a frame
  bool per_utterance = false;  // statistics and coefficients per (utterance, channel)
};

// Per-channel device vectors (C floats each; B * C with per-utterance statistics) the kernels
// exchange.
struct BatchNormStats {
  float* mean;     // statistics used to normalize
  float* inv_std;  // 1 / sqrt(var + eps)
  float* coef_a;   // forward: y = x * a + b; backward: dx = dy * a + x * b + c
  float* coef_b;
  float* coef_c;
};

// Device doubles the reductions need as scratch for data of these dimensions.
int64_t batch_norm_workspace(const BatchNormDims& dims);

// Batch statistics over the valid frames (one pass: sums of x and x^2 in double; the CPU layer
// takes two, in float deviations, and agrees to float precision), the
// running statistics update (running = (1 - momentum) running + momentum batch, with the unbiased
// variance), and the forward coefficients a = gamma * inv_std, b = beta - mean * a.
// `valid_count` = valid frames * S, which must be positive.
void batch_norm_train_stats(const BatchNormDims& dims, const float* x, const int* lengths,
                            int64_t valid_count, const float* gamma, const float* beta,
                            float momentum, float epsilon, float* running_mean, float* running_var,
                            const BatchNormStats& stats, double* workspace, cudaStream_t stream);

// Inference: mean = running_mean, inv_std = 1 / sqrt(running_var + eps), and the coefficients.
void batch_norm_inference_stats(int C, const float* gamma, const float* beta,
                                const float* running_mean, const float* running_var, float epsilon,
                                const BatchNormStats& stats, cudaStream_t stream);

// y = x * a[c] + b[c] on valid frames, exact zeros on padding.
void batch_norm_apply(const BatchNormDims& dims, const float* x, float* y, const int* lengths,
                      const float* a, const float* b, cudaStream_t stream);

// Backward reductions sum(dy) and sum(dy * (x - mean) * inv_std) over the valid frames;
// dbeta += the first, dgamma += the second. With `input_grad`, also the dx coefficients: with
// batch statistics over `valid_count` values (`batch_stats`)
//   dx = gamma * inv_std * (dy - sum(dy) / n - xhat * sum(dy * xhat) / n),
// otherwise (running statistics, constants) dx = gamma * inv_std * dy.
void batch_norm_backward_stats(const BatchNormDims& dims, const float* x, const float* dy,
                               const int* lengths, int64_t valid_count, bool batch_stats,
                               const float* gamma, float* dgamma, float* dbeta, bool input_grad,
                               const BatchNormStats& stats, double* workspace, cudaStream_t stream);

// dx = dy * a[c] + x * b[c] + c[c] on valid frames, exact zeros on padding.
void batch_norm_backward_apply(const BatchNormDims& dims, const float* x, const float* dy,
                               float* dx, const int* lengths, const BatchNormStats& stats,
                               cudaStream_t stream);

// Device doubles utterance_norm_backward_stats needs as scratch (dims.per_utterance).
int64_t utterance_norm_workspace(const BatchNormDims& dims);

// Per-utterance statistics over each utterance's valid frames (sums of x and x^2 in double, in a
// fixed order) and the forward coefficients; an utterance with no valid frame gets mean 0,
// inv_std 0. No running statistics exist in this mode.
void utterance_norm_stats(const BatchNormDims& dims, const float* x, const int* lengths,
                          const float* gamma, const float* beta, float epsilon,
                          const BatchNormStats& stats, cudaStream_t stream);

// As batch_norm_backward_stats with every utterance's own statistics (always differentiated):
// dbeta[c] += sum over b of sum(dy), dgamma[c] += sum over b of sum(dy * xhat), utterances added
// in order; with `input_grad` the dx coefficients of each (utterance, channel).
void utterance_norm_backward_stats(const BatchNormDims& dims, const float* x, const float* dy,
                                   const int* lengths, const float* gamma, float* dgamma,
                                   float* dbeta, bool input_grad, const BatchNormStats& stats,
                                   double* workspace, cudaStream_t stream);

}  // namespace ds2::kernels
