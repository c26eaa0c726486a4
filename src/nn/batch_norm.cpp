#include "nn/batch_norm.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"

namespace ds2 {

namespace {

// Calls fn(offset, b, valid) for every frame (t, b), in memory order.
template <typename Fn>
void for_each_frame(const Sequences& seq, int64_t frame_size, Fn fn) {
  const int64_t T = seq.data.dim(0), B = seq.data.dim(1);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b) fn((t * B + b) * frame_size, b, t < seq.lengths[b]);
}

// acc[c] += sum over s of f(c, s) for one {C, S} frame.
template <typename Fn>
void accumulate_frame(double* acc, int64_t C, int64_t S, Fn f) {
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

// Grows `v` to at least n elements (never shrinks, so a smaller last batch reallocates nothing).
template <typename V>
void ensure_size(V& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(n);
}

}  // namespace

NormStatistics parse_norm_statistics(const std::string& name) {
  if (name == "batch") return NormStatistics::kBatch;
  if (name == "utterance") return NormStatistics::kUtterance;
  throw Error("unknown batch-norm statistics '" + name + "' (valid: batch, utterance)");
}

std::string norm_statistics_name(NormStatistics statistics) {
  return statistics == NormStatistics::kUtterance ? "utterance" : "batch";
}

BatchNorm::BatchNorm(const std::string& name, ParameterStore& store, int channels, float momentum,
                     NormStatistics statistics, float epsilon)
    : name_(name),
      store_(store),
      channels_(channels),
      momentum_(momentum),
      statistics_(statistics),
      epsilon_(epsilon) {
  DS2_CHECK(channels > 0, name << ": batch norm needs at least one channel");
  DS2_CHECK(momentum >= 0.0f && momentum <= 1.0f,
            name << ": batch norm momentum must be in [0, 1], got " << momentum);
  gamma_ = store.add(name + ".gamma", {channels}, Init::constant(1.0f));
  beta_ = store.add(name + ".beta", {channels}, Init::constant(0.0f));
  if (!per_utterance()) {
    running_mean_ = store.add_buffer(name + ".running_mean", {channels}, Init::constant(0.0f));
    running_var_ = store.add_buffer(name + ".running_var", {channels}, Init::constant(1.0f));
  }
  prepare_groups(1);
}

std::string BatchNorm::describe() const {
  std::ostringstream out;
  out << "BatchNorm " << channels_;
  if (per_utterance())
    out << " (per utterance)";
  else
    out << " (sequence-wise, momentum " << momentum_ << ")";
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

int64_t BatchNorm::prepare_groups(int64_t batch) {
  const int64_t groups = per_utterance() ? batch : 1, n = groups * channels_;
  for (auto* v : {&mean_, &inv_std_, &coef_a_, &coef_b_, &coef_c_}) ensure_size(*v, n);
  ensure_size(sum_a_, n);
  ensure_size(sum_b_, n);
  ensure_size(counts_, groups);
  return groups;
}

void BatchNorm::forward(const Sequences& in, Sequences& out, bool training) {
  check_sequences(in, name_);
  const int64_t C = channels_, S = inner_size(in), frame = C * S;
  const int64_t G = prepare_groups(in.batch());
  const int64_t group_stride = per_utterance() ? C : 0;  // offset of utterance b's group: b * this
  const float* x = in.data.data();
  out.data.resize(in.data.shape());
  out.lengths = in.lengths;

  used_data_stats_ = training || per_utterance();
  if (used_data_stats_) {
    std::fill(counts_.begin(), counts_.begin() + G, 0);
    for (int64_t b = 0; b < in.batch(); ++b)
      counts_[per_utterance() ? b : 0] += static_cast<int64_t>(in.lengths[b]) * S;
    // Two passes (mean, then squared deviations) for a variance that does not cancel.
    std::fill(sum_a_.begin(), sum_a_.begin() + G * C, 0.0);
    for_each_frame(in, frame, [&](int64_t off, int64_t b, bool valid) {
      if (!valid) return;
      const float* p = x + off;
      accumulate_frame(sum_a_.data() + b * group_stride, C, S,
                       [p, S](int64_t c, int64_t s) { return p[c * S + s]; });
    });
    for (int64_t g = 0; g < G; ++g)
      for (int64_t c = 0; c < C; ++c)
        mean_[g * C + c] = counts_[g] ? static_cast<float>(sum_a_[g * C + c] / counts_[g]) : 0.0f;
    std::fill(sum_b_.begin(), sum_b_.begin() + G * C, 0.0);
    for_each_frame(in, frame, [&](int64_t off, int64_t b, bool valid) {
      if (!valid) return;
      const float* p = x + off;
      const float* mean = mean_.data() + b * group_stride;
      accumulate_frame(sum_b_.data() + b * group_stride, C, S, [p, S, mean](int64_t c, int64_t s) {
        const float d = p[c * S + s] - mean[c];
        return d * d;
      });
    });
    // A group with no valid frame (an empty utterance, or an all-padding batch) gets mean and
    // inv_std 0: its frames are all padding anyway, and running statistics stay untouched.
    for (int64_t g = 0; g < G; ++g)
      for (int64_t c = 0; c < C; ++c)
        inv_std_[g * C + c] =
            counts_[g]
                ? static_cast<float>(1.0 / std::sqrt(sum_b_[g * C + c] / counts_[g] + epsilon_))
                : 0.0f;
    if (training && !per_utterance() && counts_[0] > 0) {
      float* running_mean = store_.value(running_mean_);
      float* running_var = store_.value(running_var_);
      const double n = static_cast<double>(counts_[0]);
      const double unbias = n > 1 ? n / (n - 1.0) : 1.0;
      for (int64_t c = 0; c < C; ++c) {
        running_mean[c] = (1.0f - momentum_) * running_mean[c] + momentum_ * mean_[c];
        running_var[c] = (1.0f - momentum_) * running_var[c] +
                         momentum_ * static_cast<float>(sum_b_[c] / n * unbias);
      }
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
  for (int64_t g = 0; g < G; ++g)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t i = g * C + c;
      coef_a_[i] = gamma[c] * inv_std_[i];
      coef_b_[i] = beta[c] - mean_[i] * coef_a_[i];
    }
  float* y = out.data.data();
  for_each_frame(in, frame, [&](int64_t off, int64_t b, bool valid) {
    float* q = y + off;
    if (!valid) {
      std::fill(q, q + frame, 0.0f);
      return;
    }
    const float* p = x + off;
    const float* a = coef_a_.data() + b * group_stride;
    const float* bb = coef_b_.data() + b * group_stride;
    if (S == 1) {
      for (int64_t c = 0; c < C; ++c) q[c] = p[c] * a[c] + bb[c];
      return;
    }
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s) q[c * S + s] = p[c * S + s] * a[c] + bb[c];
  });
}

void BatchNorm::backward(const Sequences& in, const Sequences& /*out*/, const Sequences& grad_out,
                         Sequences& grad_in) {
  const int64_t C = channels_, S = inner_size(in), frame = C * S;
  const int64_t G = prepare_groups(in.batch());
  const int64_t group_stride = per_utterance() ? C : 0;
  const float* x = in.data.data();
  const float* dy = grad_out.data.data();
  DS2_CHECK(grad_out.data.shape() == in.data.shape(),
            name_ << ": gradient shape " << shape_str(grad_out.data.shape())
                  << " differs from the input's " << shape_str(in.data.shape()));

  // sum_a_ = sum dy, sum_b_ = sum dy * xhat, per group over its valid frames.
  std::fill(sum_a_.begin(), sum_a_.begin() + G * C, 0.0);
  std::fill(sum_b_.begin(), sum_b_.begin() + G * C, 0.0);
  for_each_frame(in, frame, [&](int64_t off, int64_t b, bool valid) {
    if (!valid) return;
    const float* p = x + off;
    const float* g = dy + off;
    const float* mean = mean_.data() + b * group_stride;
    const float* inv_std = inv_std_.data() + b * group_stride;
    accumulate_frame(sum_a_.data() + b * group_stride, C, S,
                     [g, S](int64_t c, int64_t s) { return g[c * S + s]; });
    accumulate_frame(sum_b_.data() + b * group_stride, C, S,
                     [p, g, S, mean, inv_std](int64_t c, int64_t s) {
                       return g[c * S + s] * (p[c * S + s] - mean[c]) * inv_std[c];
                     });
  });
  float* dgamma = store_.grad(gamma_);
  float* dbeta = store_.grad(beta_);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t c = 0; c < C; ++c) {
      dgamma[c] += static_cast<float>(sum_b_[g * C + c]);
      dbeta[c] += static_cast<float>(sum_a_[g * C + c]);
    }
  if (!needs_input_grad_) return;

  // dx = a * dy + c_x * x + c_0 per group and channel. With the data's own statistics (n values
  // per channel in the group):
  //   dx = gamma/std * (dy - sum(dy)/n - xhat * sum(dy*xhat)/n)
  // and with running statistics only the first term remains.
  const float* gamma = store_.value(gamma_);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t i = g * C + c;
      const double a = static_cast<double>(gamma[c]) * inv_std_[i];
      coef_a_[i] = static_cast<float>(a);
      if (used_data_stats_ && counts_[g] > 0) {
        const double n = static_cast<double>(counts_[g]);
        const double k = a * inv_std_[i] * sum_b_[i] / n;
        coef_b_[i] = static_cast<float>(-k);
        coef_c_[i] = static_cast<float>(k * mean_[i] - a * sum_a_[i] / n);
      } else {
        coef_b_[i] = 0.0f;
        coef_c_[i] = 0.0f;
      }
    }
  grad_in.data.resize(in.data.shape());
  grad_in.lengths = in.lengths;
  float* dx = grad_in.data.data();
  for_each_frame(in, frame, [&](int64_t off, int64_t b, bool valid) {
    float* q = dx + off;
    if (!valid) {
      std::fill(q, q + frame, 0.0f);
      return;
    }
    const float* p = x + off;
    const float* g = dy + off;
    const float* ca = coef_a_.data() + b * group_stride;
    const float* cb = coef_b_.data() + b * group_stride;
    const float* cc = coef_c_.data() + b * group_stride;
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
