// Conv2d's time-taps formulation: out(t') = sum over taps i of W_i * P(stride_t * t' + i - pad)
// where P(t) are the frequency-only patches {C, kf} x F' of input frame t and W_i the weight's
// kernel row i. Each tap is one GEMM over all output frames of an utterance, because P rows are
// stored grouped by input phase t % stride_t: frames s*t' + q of consecutive t' are then
// consecutive rows.
#include <algorithm>

#include "core/blas.h"
#include "core/error.h"
#include "nn/conv2d.h"

namespace ds2 {

namespace {

int floor_div(int a, int b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// Output frames t' in [lo, hi) whose tap with offset q reads an input frame inside [0, length),
// and where in the phase-grouped rows that tap's first input frame lives.
struct TapRange {
  int lo = 0, hi = 0;
  int first_row_frame = 0;  // index of the phase-grouped input frame read by output frame lo
};

TapRange tap_range(int q, int stride, int in_length, int out_length, int phase_frames) {
  TapRange r;
  r.lo = std::max(0, -floor_div(q, stride));  // ceil(-q / stride): first t' with s*t' + q >= 0
  r.hi = std::min(out_length, floor_div(in_length - 1 - q, stride) + 1);
  const int phase = q - stride * floor_div(q, stride);
  r.first_row_frame = phase * phase_frames + r.lo + floor_div(q, stride);
  return r;
}

}  // namespace

void Conv2d::frequency_patches(const Sequences& in, int b, int in_freq, int out_freq,
                               int phase_frames) {
  const int B = static_cast<int>(in.data.dim(1)), C = in_channels_, kf = kernel_f_;
  const int s = stride_t_, length = in.lengths[b];
  const int64_t K = int64_t{C} * kf;
  col_.resize({int64_t{s} * phase_frames * out_freq, K});
  const float* x = in.data.data();
  for (int phase = 0; phase < s; ++phase)
    for (int u = 0; u < phase_frames; ++u) {
      const int t = u * s + phase;
      float* rows = col_.data() + (int64_t{phase} * phase_frames + u) * out_freq * K;
      if (t >= length) {  // rounds the phase up to phase_frames frames
        std::fill(rows, rows + out_freq * K, 0.0f);
        continue;
      }
      for (int fo = 0; fo < out_freq; ++fo) {
        float* row = rows + fo * K;
        const int f0 = fo * stride_f_ - kf / 2;
        const int lo = std::max(0, -f0), hi = std::max(lo, std::min(kf, in_freq - f0));
        for (int c = 0; c < C; ++c) {
          const float* src = x + ((int64_t{t} * B + b) * C + c) * in_freq + f0;
          float* dst = row + c * kf;
          std::fill(dst, dst + lo, 0.0f);
          std::copy(src + lo, src + hi, dst + lo);
          std::fill(dst + hi, dst + kf, 0.0f);
        }
      }
    }
}

void Conv2d::repack_weight_by_tap() {
  const int C = in_channels_, kt = kernel_t_, kf = kernel_f_, C_out = out_channels_;
  weight_by_tap_.resize({kt, C_out, int64_t{C} * kf});
  const float* w = store_.value(weight_);
  for (int i = 0; i < kt; ++i)
    for (int co = 0; co < C_out; ++co)
      for (int c = 0; c < C; ++c)
        std::copy(w + ((int64_t{co} * C + c) * kt + i) * kf,
                  w + ((int64_t{co} * C + c) * kt + i + 1) * kf,
                  weight_by_tap_.data() + (int64_t{i} * C_out + co) * C * kf + c * kf);
}

void Conv2d::forward_time_taps(const Sequences& in, Sequences& out, int F) {
  const int B = static_cast<int>(in.data.dim(1)), F_out = output_freq(F);
  const int C_out = out_channels_, kt = kernel_t_, s = stride_t_;
  const int K = in_channels_ * kernel_f_;
  const int64_t frame_size = int64_t{C_out} * F_out;
  repack_weight_by_tap();
  const float* bias = with_bias_ ? store_.value(bias_) : nullptr;
  for (int b = 0; b < B; ++b) {
    const int length = in.lengths[b], out_length = out.lengths[b];
    if (out_length == 0) continue;
    const int phase_frames = (length + s - 1) / s;
    frequency_patches(in, b, F, F_out, phase_frames);
    const int M = out_length * F_out;  // output rows (t', f') of this utterance
    gemm_out_.resize({C_out, M});
    gemm_out_.fill(0.0f);
    for (int i = 0; i < kt; ++i) {
      const TapRange r = tap_range(i - kt / 2, s, length, out_length, phase_frames);
      if (r.lo >= r.hi) continue;
      // out[:, t' in range] += W_i {C_out, K} * P[rows]^T
      gemm(false, true, C_out, (r.hi - r.lo) * F_out, K, 1.0f,
           weight_by_tap_.data() + int64_t{i} * C_out * K, K,
           col_.data() + int64_t{r.first_row_frame} * F_out * K, K, 1.0f,
           gemm_out_.data() + int64_t{r.lo} * F_out, M);
    }
    for (int t = 0; t < out_length; ++t) {
      float* dst = out.data.data() + (int64_t{t} * B + b) * frame_size;
      for (int co = 0; co < C_out; ++co) {
        const float* src = gemm_out_.data() + int64_t{co} * M + int64_t{t} * F_out;
        const float shift = bias ? bias[co] : 0.0f;
        for (int f = 0; f < F_out; ++f) dst[co * F_out + f] = src[f] + shift;
      }
    }
  }
}

void Conv2d::backward_time_taps(const Sequences& in, const Sequences& out,
                                const Sequences& grad_out, Sequences& grad_in, int F) {
  const int B = static_cast<int>(in.data.dim(1)), F_out = output_freq(F);
  const int C = in_channels_, C_out = out_channels_, kt = kernel_t_, kf = kernel_f_;
  const int s = stride_t_, K = C * kf;
  const int64_t frame_size = int64_t{C_out} * F_out;
  repack_weight_by_tap();
  grad_weight_by_tap_.resize({kt, C_out, K});
  grad_weight_by_tap_.fill(0.0f);
  float* dbias = with_bias_ ? store_.grad(bias_) : nullptr;
  for (int b = 0; b < B; ++b) {
    const int length = in.lengths[b], out_length = out.lengths[b];
    if (out_length == 0) continue;
    const int phase_frames = (length + s - 1) / s;
    const int M = out_length * F_out;
    // dY of this utterance as {C_out, M}, the layout of the forward's GEMM output.
    gemm_out_.resize({C_out, M});
    float* dy = gemm_out_.data();
    for (int t = 0; t < out_length; ++t) {
      const float* src = grad_out.data.data() + (int64_t{t} * B + b) * frame_size;
      for (int co = 0; co < C_out; ++co)
        std::copy(src + co * F_out, src + (co + 1) * F_out, dy + int64_t{co} * M + t * F_out);
    }
    if (dbias)
      for (int co = 0; co < C_out; ++co) {
        float sum = 0.0f;
        for (int m = 0; m < M; ++m) sum += dy[int64_t{co} * M + m];
        dbias[co] += sum;
      }
    frequency_patches(in, b, F, F_out, phase_frames);
    for (int i = 0; i < kt; ++i) {
      const TapRange r = tap_range(i - kt / 2, s, length, out_length, phase_frames);
      if (r.lo >= r.hi) continue;
      // dW_i {C_out, K} += dY[:, t' in range] * P[rows]
      gemm(false, false, C_out, K, (r.hi - r.lo) * F_out, 1.0f, dy + int64_t{r.lo} * F_out, M,
           col_.data() + int64_t{r.first_row_frame} * F_out * K, K, 1.0f,
           grad_weight_by_tap_.data() + int64_t{i} * C_out * K, K);
    }
    if (!needs_input_grad_) continue;

    // dP(t) = sum over taps i of W_i^T dY(t') with s*t' + i - pad = t: one GEMM of depth
    // kt * C_out over rows (t, f'), after gathering for each row the dY rows its taps saw.
    grad_out_rows_.resize({M, C_out});
    for (int co = 0; co < C_out; ++co)
      for (int m = 0; m < M; ++m) grad_out_rows_[int64_t{m} * C_out + co] = dy[int64_t{co} * M + m];
    const int depth = kt * C_out;
    grad_out_by_tap_.resize({int64_t{length} * F_out, depth});
    for (int t = 0; t < length; ++t)
      for (int i = 0; i < kt; ++i) {
        const int q = t - (i - kt / 2);  // = s * t' for the output frame this tap served
        const int to = q >= 0 && q % s == 0 ? q / s : -1;
        for (int fo = 0; fo < F_out; ++fo) {
          float* dst = grad_out_by_tap_.data() + (int64_t{t} * F_out + fo) * depth + i * C_out;
          if (to < 0 || to >= out_length) {
            std::fill(dst, dst + C_out, 0.0f);
          } else {
            const float* src = grad_out_rows_.data() + (int64_t{to} * F_out + fo) * C_out;
            std::copy(src, src + C_out, dst);
          }
        }
      }
    grad_col_.resize({int64_t{length} * F_out, K});
    gemm(false, false, length * F_out, K, depth, 1.0f, grad_out_by_tap_.data(), depth,
         weight_by_tap_.data(), K, 0.0f, grad_col_.data(), K);
    // Scatter-add the frequency patches back onto the input frames they were read from.
    for (int t = 0; t < length; ++t)
      for (int fo = 0; fo < F_out; ++fo) {
        const float* row = grad_col_.data() + (int64_t{t} * F_out + fo) * K;
        const int f0 = fo * stride_f_ - kf / 2;
        const int lo = std::max(0, -f0), hi = std::min(kf, F - f0);
        for (int c = 0; c < C; ++c) {
          float* dst = grad_in.data.data() + ((int64_t{t} * B + b) * C + c) * F + f0;
          const float* src = row + c * kf;
          for (int j = lo; j < hi; ++j) dst[j] += src[j];
        }
      }
  }
  // Back to the parameter layout {C_out, C, kt, kf}.
  float* dw = store_.grad(weight_);
  for (int i = 0; i < kt; ++i)
    for (int co = 0; co < C_out; ++co)
      for (int c = 0; c < C; ++c) {
        const float* src = grad_weight_by_tap_.data() + (int64_t{i} * C_out + co) * K + c * kf;
        float* dst = dw + ((int64_t{co} * C + c) * kt + i) * kf;
        for (int j = 0; j < kf; ++j) dst[j] += src[j];
      }
}

}  // namespace ds2
