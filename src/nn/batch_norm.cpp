#include "nn/batch_norm.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"

namespace ds2 {

namespace {

// Calls fn(frame_pointer_offset) for every valid frame, in memory order.
template <typename Fn>
void for_each_valid_frame(const Sequences& seq, int64_t frame_size, Fn fn) {
  const int64_t T = seq.data.dim(0), B = seq.data.dim(1);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      if (t < seq.lengths[b]) fn((t * B + b) * frame_size);
}

// Calls fn(offset, valid) for every frame, in memory order.
template <typename Fn>
void for_each_frame(const Sequences& seq, int64_t frame_size, Fn fn) {
  const int64_t T = seq.data.dim(0), B = seq.data.dim(1);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b) fn((t * B + b) * frame_size, t < seq.lengths[b]);
}

// acc[c] += sum over s of f(c, s) for one {C, S} frame.
template <typename Fn>
void accumulate_frame(std::vector<double>& acc, int64_t C, int64_t S, Fn f) {
  if (S == 1) {
    for (int64_t c = 0; c < C; ++c) acc[c] += f(c, 0);
    return;
  }
  for (int64_t c = 0; c < C; ++c) {
    float partial = 0.0f;  // at most a few hundred terms: float is enough here
    for (int64_t s = 0; s < S; ++s) partial += f(c, s);
    acc[c] += partial;
  }
}

}  // namespace

BatchNorm::BatchNorm(const std::string& name, ParameterStore& store, int channels, float momentum,
                     float epsilon)
    : name_(name), store_(store), channels_(channels), momentum_(momentum), epsilon_(epsilon) {
  DS2_CHECK(channels > 0, name << ": batch norm needs at least one channel");
  DS2_CHECK(momentum >= 0.0f && momentum <= 1.0f,
            name << ": batch norm momentum must be in [0, 1], got " << momentum);
  gamma_ = store.add(name + ".gamma", {channels}, Init::constant(1.0f));
  beta_ = store.add(name + ".beta", {channels}, Init::constant(0.0f));
  running_mean_ = store.add_buffer(name + ".running_mean", {channels}, Init::constant(0.0f));
  running_var_ = store.add_buffer(name + ".running_var", {channels}, Init::constant(1.0f));
  mean_.resize(channels);
  inv_std_.resize(channels);
  sum_a_.resize(channels);
  sum_b_.resize(channels);
  coef_a_.resize(channels);
  coef_b_.resize(channels);
  coef_c_.resize(channels);
}

std::string BatchNorm::describe() const {
  std::ostringstream out;
  out << "BatchNorm " << channels_ << " (sequence-wise, momentum " << momentum_ << ")";
  return out.str();
}

Shape BatchNorm::output_frame_shape(const Shape& input_frame_shape) const {
  return input_frame_shape;
}

int64_t BatchNorm::inner_size(const Sequences& in) const {
  const Shape& s = in.data.shape();
  DS2_CHECK((s.size() == 3 || s.size() == 4) && s[2] == channels_,
            name_ << ": expected {T, B, " << channels_ << "} or {T, B, " << channels_
                  << ", F} input, got " << shape_str(s));
  return s.size() == 4 ? s[3] : 1;
}

void BatchNorm::forward(const Sequences& in, Sequences& out, bool training) {
  check_sequences(in, name_);
  const int64_t C = channels_, S = inner_size(in), frame = C * S;
  const float* x = in.data.data();
  out.data.resize(in.data.shape());
  out.lengths = in.lengths;

  used_batch_stats_ = training;
  if (training) {
    int64_t frames = 0;
    for (int len : in.lengths) frames += len;
    valid_count_ = frames * S;
    if (valid_count_ == 0) {  // nothing to normalize; keep the running statistics untouched
      out.data.fill(0.0f);
      std::fill(mean_.begin(), mean_.end(), 0.0f);
      std::fill(inv_std_.begin(), inv_std_.end(), 0.0f);
      return;
    }
    // Two passes (mean, then squared deviations) for a variance that does not cancel.
    std::fill(sum_a_.begin(), sum_a_.end(), 0.0);
    for_each_valid_frame(in, frame, [&](int64_t off) {
      const float* p = x + off;
      accumulate_frame(sum_a_, C, S, [p, S](int64_t c, int64_t s) { return p[c * S + s]; });
    });
    const double n = static_cast<double>(valid_count_);
    for (int64_t c = 0; c < C; ++c) mean_[c] = static_cast<float>(sum_a_[c] / n);
    std::fill(sum_b_.begin(), sum_b_.end(), 0.0);
    const float* mean = mean_.data();
    for_each_valid_frame(in, frame, [&](int64_t off) {
      const float* p = x + off;
      accumulate_frame(sum_b_, C, S, [p, S, mean](int64_t c, int64_t s) {
        const float d = p[c * S + s] - mean[c];
        return d * d;
      });
    });
    float* running_mean = store_.value(running_mean_);
    float* running_var = store_.value(running_var_);
    const double unbias = valid_count_ > 1 ? n / (n - 1.0) : 1.0;
    for (int64_t c = 0; c < C; ++c) {
      const double var = sum_b_[c] / n;
      inv_std_[c] = static_cast<float>(1.0 / std::sqrt(var + epsilon_));
      running_mean[c] = (1.0f - momentum_) * running_mean[c] + momentum_ * mean_[c];
      running_var[c] =
          (1.0f - momentum_) * running_var[c] + momentum_ * static_cast<float>(var * unbias);
    }
  } else {
    const float* running_mean = store_.value(running_mean_);
    const float* running_var = store_.value(running_var_);
    for (int64_t c = 0; c < C; ++c) {
      mean_[c] = running_mean[c];
      inv_std_[c] = 1.0f / std::sqrt(running_var[c] + epsilon_);
    }
  }

  // y = x * a + b with a = gamma / std and b = beta - mean * a.
  const float* gamma = store_.value(gamma_);
  const float* beta = store_.value(beta_);
  for (int64_t c = 0; c < C; ++c) {
    coef_a_[c] = gamma[c] * inv_std_[c];
    coef_b_[c] = beta[c] - mean_[c] * coef_a_[c];
  }
  const float* a = coef_a_.data();
  const float* b = coef_b_.data();
  float* y = out.data.data();
  for_each_frame(in, frame, [&](int64_t off, bool valid) {
    float* q = y + off;
    if (!valid) {
      std::fill(q, q + frame, 0.0f);
      return;
    }
    const float* p = x + off;
    if (S == 1) {
      for (int64_t c = 0; c < C; ++c) q[c] = p[c] * a[c] + b[c];
      return;
    }
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s) q[c * S + s] = p[c * S + s] * a[c] + b[c];
  });
}

void BatchNorm::backward(const Sequences& in, const Sequences& /*out*/, const Sequences& grad_out,
                         Sequences& grad_in) {
  const int64_t C = channels_, S = inner_size(in), frame = C * S;
  const float* x = in.data.data();
  const float* dy = grad_out.data.data();
  DS2_CHECK(grad_out.data.shape() == in.data.shape(),
            name_ << ": gradient shape " << shape_str(grad_out.data.shape())
                  << " differs from the input's " << shape_str(in.data.shape()));

  // sum_a_ = sum dy, sum_b_ = sum dy * xhat, over the valid frames.
  std::fill(sum_a_.begin(), sum_a_.end(), 0.0);
  std::fill(sum_b_.begin(), sum_b_.end(), 0.0);
  const float* mean = mean_.data();
  const float* inv_std = inv_std_.data();
  for_each_valid_frame(in, frame, [&](int64_t off) {
    const float* p = x + off;
    const float* g = dy + off;
    accumulate_frame(sum_a_, C, S, [g, S](int64_t c, int64_t s) { return g[c * S + s]; });
    accumulate_frame(sum_b_, C, S, [p, g, S, mean, inv_std](int64_t c, int64_t s) {
      return g[c * S + s] * (p[c * S + s] - mean[c]) * inv_std[c];
    });
  });
  float* dgamma = store_.grad(gamma_);
  float* dbeta = store_.grad(beta_);
  for (int64_t c = 0; c < C; ++c) {
    dgamma[c] += static_cast<float>(sum_b_[c]);
    dbeta[c] += static_cast<float>(sum_a_[c]);
  }
  if (!needs_input_grad_) return;

  // dx = a * dy + c_x * x + c_0 per channel. With batch statistics (n values per channel):
  //   dx = gamma/std * (dy - sum(dy)/n - xhat * sum(dy*xhat)/n)
  // and with running statistics only the first term remains.
  const float* gamma = store_.value(gamma_);
  for (int64_t c = 0; c < C; ++c) {
    const double a = static_cast<double>(gamma[c]) * inv_std[c];
    coef_a_[c] = static_cast<float>(a);
    if (used_batch_stats_ && valid_count_ > 0) {
      const double n = static_cast<double>(valid_count_);
      const double k = a * inv_std[c] * sum_b_[c] / n;
      coef_b_[c] = static_cast<float>(-k);
      coef_c_[c] = static_cast<float>(k * mean[c] - a * sum_a_[c] / n);
    } else {
      coef_b_[c] = 0.0f;
      coef_c_[c] = 0.0f;
    }
  }
  grad_in.data.resize(in.data.shape());
  grad_in.lengths = in.lengths;
  float* dx = grad_in.data.data();
  const float* ca = coef_a_.data();
  const float* cb = coef_b_.data();
  const float* cc = coef_c_.data();
  for_each_frame(in, frame, [&](int64_t off, bool valid) {
    float* q = dx + off;
    if (!valid) {
      std::fill(q, q + frame, 0.0f);
      return;
    }
    const float* p = x + off;
    const float* g = dy + off;
    if (S == 1) {
      for (int64_t c = 0; c < C; ++c) q[c] = g[c] * ca[c] + p[c] * cb[c] + cc[c];
      return;
    }
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s)
        q[c * S + s] = g[c * S + s] * ca[c] + p[c * S + s] * cb[c] + cc[c];
  });
}

}  // namespace ds2
