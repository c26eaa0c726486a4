#include "nn/lookahead.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace ds2 {

Lookahead::Lookahead(const std::string& name, ParameterStore& store, int features, int context)
    : name_(name), store_(store), features_(features), context_(context) {
  DS2_CHECK(features > 0, name << ": features must be positive, got " << features);
  DS2_CHECK(context >= 1, name << ": context must be at least 1 frame, got " << context);
  weight_ = store.add(name + ".weight", {context + 1, features}, Init::uniform_fan_in(context + 1));
}

std::string Lookahead::describe() const {
  std::ostringstream out;
  out << "Lookahead " << features_ << " features, " << context_ << " future frames";
  return out.str();
}

Shape Lookahead::output_frame_shape(const Shape& input_frame_shape) const {
  DS2_CHECK(shape_numel(input_frame_shape) == features_,
            name_ << ": frame shape " << shape_str(input_frame_shape) << " is not " << features_
                  << " features");
  return {features_};
}

void Lookahead::forward(const Sequences& in, Sequences& out, bool /*training*/) {
  check_sequences(in, name_);
  DS2_CHECK(in.frame_size() == features_ || in.data.numel() == 0,
            name_ << ": input " << shape_str(in.data.shape()) << " is not " << features_
                  << " features per frame");
  const int T = static_cast<int>(in.data.dim(0)), B = static_cast<int>(in.data.dim(1));
  const int F = features_;
  out.data.resize({T, B, F});
  out.lengths = in.lengths;
  const float* w = store_.value(weight_);
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < B; ++b) {
      float* y = out.data.data() + (int64_t{t} * B + b) * F;
      std::fill(y, y + F, 0.0f);
      const int len = in.lengths[b];
      if (t >= len) continue;
      for (int j = 0; j <= context_ && t + j < len; ++j) {
        const float* x = in.data.data() + (int64_t{t + j} * B + b) * F;
        const float* wj = w + int64_t{j} * F;
        for (int f = 0; f < F; ++f) y[f] += wj[f] * x[f];
      }
    }
}

void Lookahead::backward(const Sequences& in, const Sequences& out, const Sequences& grad_out,
                         Sequences& grad_in) {
  DS2_CHECK(grad_out.data.shape() == out.data.shape(),
            name_ << ": gradient shape " << shape_str(grad_out.data.shape())
                  << " differs from the output's " << shape_str(out.data.shape()));
  const int T = static_cast<int>(in.data.dim(0)), B = static_cast<int>(in.data.dim(1));
  const int F = features_;
  const float* w = store_.value(weight_);
  float* dw = store_.grad(weight_);
  if (needs_input_grad()) {
    grad_in.data.resize(in.data.shape());
    grad_in.lengths = in.lengths;
  }
  // Frame s of the input fed outputs s - j for j = 0..context (those inside the utterance).
  for (int s = 0; s < T; ++s)
    for (int b = 0; b < B; ++b) {
      const int len = in.lengths[b];
      const int64_t off = (int64_t{s} * B + b) * F;
      float* dx = needs_input_grad() ? grad_in.data.data() + off : nullptr;
      if (dx) std::fill(dx, dx + F, 0.0f);
      if (s >= len) continue;
      const float* x = in.data.data() + off;
      for (int j = 0; j <= context_ && s - j >= 0; ++j) {
        const float* dy = grad_out.data.data() + (int64_t{s - j} * B + b) * F;
        const float* wj = w + int64_t{j} * F;
        float* dwj = dw + int64_t{j} * F;
        for (int f = 0; f < F; ++f) {
          dwj[f] += dy[f] * x[f];
          if (dx) dx[f] += wj[f] * dy[f];
        }
      }
    }
}

}  // namespace ds2
