#include "nn/conv2d.h"

#include <algorithm>
#include <sstream>

#include "core/blas.h"
#include "core/error.h"

namespace ds2 {

namespace {
// Default im2col workspace bound in floats (16 MiB): large enough that each chunk's GEMM is
// efficient, small enough to bound memory whatever the batch.
constexpr int64_t kDefaultColumnBudget = int64_t{1} << 22;
}  // namespace

Conv2d::Conv2d(const std::string& name, ParameterStore& store, int in_channels, int out_channels,
               int kernel_t, int kernel_f, int stride_t, int stride_f, bool with_bias)
    : name_(name),
      store_(store),
      in_channels_(in_channels),
      out_channels_(out_channels),
      kernel_t_(kernel_t),
      kernel_f_(kernel_f),
      stride_t_(stride_t),
      stride_f_(stride_f),
      with_bias_(with_bias),
      column_budget_(kDefaultColumnBudget) {
  DS2_CHECK(in_channels > 0 && out_channels > 0,
            name << ": channels must be positive, got " << in_channels << " -> " << out_channels);
  DS2_CHECK(kernel_t > 0 && kernel_f > 0 && stride_t > 0 && stride_f > 0,
            name << ": kernel and stride must be positive, got kernel " << kernel_t << "x"
                 << kernel_f << " stride " << stride_t << "x" << stride_f);
  const int64_t fan_in = int64_t{in_channels} * kernel_t * kernel_f;
  weight_ = store.add(name + ".weight", {out_channels, in_channels, kernel_t, kernel_f},
                      Init::uniform_fan_in(fan_in));
  if (with_bias) bias_ = store.add(name + ".bias", {out_channels}, Init::uniform_fan_in(fan_in));
}

std::string Conv2d::describe() const {
  std::ostringstream out;
  out << "Conv2d " << in_channels_ << "->" << out_channels_ << " kernel " << kernel_t_ << "x"
      << kernel_f_ << " stride " << stride_t_ << "x" << stride_f_ << (with_bias_ ? "" : " no-bias")
      << (algorithm() == ConvAlgorithm::kTimeTaps ? " (time taps)" : " (patches)");
  return out.str();
}

int Conv2d::output_length(int input_length) const {
  if (input_length <= 0) return 0;
  return (input_length + 2 * (kernel_t_ / 2) - kernel_t_) / stride_t_ + 1;
}

int Conv2d::output_freq(int input_freq) const {
  if (input_freq <= 0) return 0;
  return (input_freq + 2 * (kernel_f_ / 2) - kernel_f_) / stride_f_ + 1;
}

Shape Conv2d::output_frame_shape(const Shape& input_frame_shape) const {
  const bool ok = (input_frame_shape.size() == 1 && in_channels_ == 1) ||
                  (input_frame_shape.size() == 2 && input_frame_shape[0] == in_channels_);
  DS2_CHECK(ok, name_ << ": frame shape " << shape_str(input_frame_shape) << " does not have "
                      << in_channels_ << " channel(s)");
  return {out_channels_, output_freq(static_cast<int>(input_frame_shape.back()))};
}

int Conv2d::input_freq(const Sequences& in) const {
  check_sequences(in, name_);
  const Shape& s = in.data.shape();
  output_frame_shape(Shape(s.begin() + 2, s.end()));
  return static_cast<int>(s.back());
}

void Conv2d::list_valid_frames(const Sequences& out) {
  const int T = static_cast<int>(out.data.dim(0)), B = static_cast<int>(out.data.dim(1));
  valid_frames_.clear();
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < B; ++b)
      if (t < out.lengths[b]) valid_frames_.push_back(t * B + b);
}

int Conv2d::frames_per_chunk(int out_freq) const {
  const int64_t row = patch_size();
  return static_cast<int>(std::max<int64_t>(1, column_budget_ / (row * std::max(1, out_freq))));
}

void Conv2d::im2col(const Sequences& in, int in_freq, int out_freq, const int* frames, int count) {
  const int B = static_cast<int>(in.data.dim(1)), C = in_channels_;
  const int kt = kernel_t_, kf = kernel_f_;
  const int64_t K = int64_t{C} * kt * kf;
  const float* x = in.data.data();
  float* col = col_.data();
  for (int j = 0; j < count; ++j) {
    const int t_out = frames[j] / B, b = frames[j] % B, length = in.lengths[b];
    const int t0 = t_out * stride_t_ - kt / 2;
    for (int fo = 0; fo < out_freq; ++fo) {
      float* row = col + (int64_t{j} * out_freq + fo) * K;
      const int f0 = fo * stride_f_ - kf / 2;
      const int lo = std::max(0, -f0), hi = std::min(kf, in_freq - f0);
      for (int c = 0; c < C; ++c)
        for (int i = 0; i < kt; ++i) {
          float* dst = row + (int64_t{c} * kt + i) * kf;
          const int t = t0 + i;
          if (t < 0 || t >= length || lo >= hi) {
            std::fill(dst, dst + kf, 0.0f);
            continue;
          }
          const float* src = x + ((int64_t{t} * B + b) * C + c) * in_freq + f0;
          std::fill(dst, dst + lo, 0.0f);
          std::copy(src + lo, src + hi, dst + lo);
          std::fill(dst + hi, dst + kf, 0.0f);
        }
    }
  }
}

void Conv2d::col2im(Sequences& grad_in, int in_freq, int out_freq, const int* frames,
                    int count) const {
  const int B = static_cast<int>(grad_in.data.dim(1)), C = in_channels_;
  const int kt = kernel_t_, kf = kernel_f_;
  const int64_t K = int64_t{C} * kt * kf;
  float* dx = grad_in.data.data();
  const float* col = col_.data();
  for (int j = 0; j < count; ++j) {
    const int t_out = frames[j] / B, b = frames[j] % B, length = grad_in.lengths[b];
    const int t0 = t_out * stride_t_ - kt / 2;
    for (int fo = 0; fo < out_freq; ++fo) {
      const float* row = col + (int64_t{j} * out_freq + fo) * K;
      const int f0 = fo * stride_f_ - kf / 2;
      const int lo = std::max(0, -f0), hi = std::min(kf, in_freq - f0);
      for (int c = 0; c < C; ++c)
        for (int i = 0; i < kt; ++i) {
          const int t = t0 + i;
          if (t < 0 || t >= length) continue;
          const float* src = row + (int64_t{c} * kt + i) * kf;
          float* dst = dx + ((int64_t{t} * B + b) * C + c) * in_freq + f0;
          for (int jf = lo; jf < hi; ++jf) dst[jf] += src[jf];
        }
    }
  }
}

ConvAlgorithm Conv2d::algorithm() const {
  if (algorithm_ != ConvAlgorithm::kAuto) return algorithm_;
  return in_channels_ * kernel_f_ >= 128 ? ConvAlgorithm::kTimeTaps : ConvAlgorithm::kPatches;
}

void Conv2d::forward(const Sequences& in, Sequences& out, bool /*training*/) {
  const int F = input_freq(in);
  const int T = static_cast<int>(in.data.dim(0)), B = static_cast<int>(in.data.dim(1));
  out.data.resize({output_length(T), B, out_channels_, output_freq(F)});
  out.lengths.resize(B);
  for (int b = 0; b < B; ++b) out.lengths[b] = output_length(in.lengths[b]);
  zero_padding(out);
  if (algorithm() == ConvAlgorithm::kTimeTaps) {
    forward_time_taps(in, out, F);
  } else {
    forward_patches(in, out, F);
  }
}

void Conv2d::backward(const Sequences& in, const Sequences& out, const Sequences& grad_out,
                      Sequences& grad_in) {
  const int F = input_freq(in);
  DS2_CHECK(grad_out.data.shape() == out.data.shape(),
            name_ << ": gradient shape " << shape_str(grad_out.data.shape())
                  << " differs from the output's " << shape_str(out.data.shape()));
  if (needs_input_grad_) {
    grad_in.data.resize(in.data.shape());
    grad_in.lengths = in.lengths;
    grad_in.data.fill(0.0f);
  }
  if (algorithm() == ConvAlgorithm::kTimeTaps) {
    backward_time_taps(in, out, grad_out, grad_in, F);
  } else {
    backward_patches(in, out, grad_out, grad_in, F);
  }
}

void Conv2d::forward_patches(const Sequences& in, Sequences& out, int F) {
  const int F_out = output_freq(F), C_out = out_channels_;
  list_valid_frames(out);
  const int64_t K = patch_size();
  const int64_t frame_size = int64_t{C_out} * F_out;
  const float* w = store_.value(weight_);
  const float* bias = with_bias_ ? store_.value(bias_) : nullptr;
  float* y = out.data.data();
  const int chunk = frames_per_chunk(F_out);
  const int total = static_cast<int>(valid_frames_.size());
  for (int start = 0; start < total; start += chunk) {
    const int count = std::min(chunk, total - start);
    const int* frames = valid_frames_.data() + start;
    const int N = count * F_out;
    col_.resize({N, K});
    gemm_out_.resize({C_out, N});
    im2col(in, F, F_out, frames, count);
    // gemm_out {C_out, N} = W {C_out, K} * col^T; column (j, f') is output frame j at f'.
    gemm(false, true, C_out, N, static_cast<int>(K), 1.0f, w, static_cast<int>(K), col_.data(),
         static_cast<int>(K), 0.0f, gemm_out_.data(), N);
    for (int j = 0; j < count; ++j) {
      float* dst = y + frames[j] * frame_size;
      for (int c = 0; c < C_out; ++c) {
        const float* src = gemm_out_.data() + int64_t{c} * N + int64_t{j} * F_out;
        const float shift = bias ? bias[c] : 0.0f;
        for (int f = 0; f < F_out; ++f) dst[c * F_out + f] = src[f] + shift;
      }
    }
  }
}

void Conv2d::backward_patches(const Sequences& in, const Sequences& out, const Sequences& grad_out,
                              Sequences& grad_in, int F) {
  const int F_out = output_freq(F), C_out = out_channels_;
  list_valid_frames(out);
  const int64_t K = patch_size();
  const int64_t frame_size = int64_t{C_out} * F_out;
  const float* w = store_.value(weight_);
  float* dw = store_.grad(weight_);
  float* dbias = with_bias_ ? store_.grad(bias_) : nullptr;
  const float* dy = grad_out.data.data();
  const int chunk = frames_per_chunk(F_out);
  const int total = static_cast<int>(valid_frames_.size());
  for (int start = 0; start < total; start += chunk) {
    const int count = std::min(chunk, total - start);
    const int* frames = valid_frames_.data() + start;
    const int N = count * F_out;
    col_.resize({N, K});
    gemm_out_.resize({C_out, N});
    float* g = gemm_out_.data();
    for (int j = 0; j < count; ++j) {
      const float* src = dy + frames[j] * frame_size;
      for (int c = 0; c < C_out; ++c)
        std::copy(src + c * F_out, src + (c + 1) * F_out, g + int64_t{c} * N + int64_t{j} * F_out);
    }
    if (dbias) {
      for (int c = 0; c < C_out; ++c) {
        float sum = 0.0f;
        for (int n = 0; n < N; ++n) sum += g[int64_t{c} * N + n];
        dbias[c] += sum;
      }
    }
    im2col(in, F, F_out, frames, count);
    // dW {C_out, K} += dY {C_out, N} * col {N, K}
    gemm(false, false, C_out, static_cast<int>(K), N, 1.0f, g, N, col_.data(), static_cast<int>(K),
         1.0f, dw, static_cast<int>(K));
    if (!needs_input_grad_) continue;
    // dcol {N, K} = dY^T * W, then scattered back onto the input positions it was read from.
    gemm(true, false, N, static_cast<int>(K), C_out, 1.0f, g, N, w, static_cast<int>(K), 0.0f,
         col_.data(), static_cast<int>(K));
    col2im(grad_in, F, F_out, frames, count);
  }
}

}  // namespace ds2
