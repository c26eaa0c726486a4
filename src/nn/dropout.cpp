#include "nn/dropout.h"

#include <sstream>

#include "core/error.h"

namespace ds2 {

Dropout::Dropout(const std::string& name, float probability)
    : name_(name), probability_(probability) {
  DS2_CHECK(probability >= 0.0f && probability < 1.0f,
            name << ": dropout probability must be in [0, 1), got " << probability);
}

std::string Dropout::describe() const {
  std::ostringstream s;
  s << "Dropout p=" << probability_;
  return s.str();
}

void Dropout::forward(const Sequences& in, Sequences& out, bool training) {
  out.data.resize(in.data.shape());
  out.lengths = in.lengths;
  const int64_t n = in.data.numel();
  const float* x = in.data.data();
  float* y = out.data.data();
  if (!training || probability_ == 0.0f) {
    std::copy(x, x + n, y);
    return;
  }
  scale_.resize(in.data.shape());
  const float keep = 1.0f / (1.0f - probability_);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  float* s = scale_.data();
  for (int64_t i = 0; i < n; ++i) {
    s[i] = uniform(rng_.engine()) < probability_ ? 0.0f : keep;
    y[i] = x[i] * s[i];
  }
  zero_padding(out);
}

void Dropout::backward(const Sequences& in, const Sequences&, const Sequences& grad_out,
                       Sequences& grad_in) {
  grad_in.data.resize(in.data.shape());
  grad_in.lengths = in.lengths;
  const int64_t n = in.data.numel();
  const float* dy = grad_out.data.data();
  float* dx = grad_in.data.data();
  if (probability_ == 0.0f) {
    std::copy(dy, dy + n, dx);
  } else {
    const float* s = scale_.data();
    for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * s[i];
  }
  zero_padding(grad_in);
}

}  // namespace ds2
