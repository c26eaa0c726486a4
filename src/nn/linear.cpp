#include "nn/linear.h"

#include <algorithm>
#include <sstream>

#include "core/blas.h"
#include "core/error.h"

namespace ds2 {

Linear::Linear(const std::string& name, ParameterStore& store, int in_features, int out_features)
    : name_(name), store_(store), in_features_(in_features), out_features_(out_features) {
  DS2_CHECK(in_features > 0 && out_features > 0,
            name << ": features must be positive, got " << in_features << " -> " << out_features);
  weight_ =
      store.add(name + ".weight", {out_features, in_features}, Init::uniform_fan_in(in_features));
  bias_ = store.add(name + ".bias", {out_features}, Init::uniform_fan_in(in_features));
}

std::string Linear::describe() const {
  std::ostringstream out;
  out << "Linear " << in_features_ << "->" << out_features_;
  return out.str();
}

Shape Linear::output_frame_shape(const Shape& input_frame_shape) const {
  DS2_CHECK(shape_numel(input_frame_shape) == in_features_,
            name_ << ": frame shape " << shape_str(input_frame_shape) << " is not " << in_features_
                  << " features");
  return {out_features_};
}

void Linear::forward(const Sequences& in, Sequences& out, bool /*training*/) {
  check_sequences(in, name_);
  DS2_CHECK(in.frame_size() == in_features_ || in.data.numel() == 0,
            name_ << ": input " << shape_str(in.data.shape()) << " is not " << in_features_
                  << " features per frame");
  const int T = static_cast<int>(in.data.dim(0)), B = static_cast<int>(in.data.dim(1));
  const int K = out_features_, rows = T * B;
  out.data.resize({T, B, K});
  out.lengths = in.lengths;
  const float* w = store_.value(weight_);
  const float* bias = store_.value(bias_);
  float* y = out.data.data();
  gemm(false, true, rows, K, in_features_, 1.0f, in.data.data(), in_features_, w, in_features_,
       0.0f, y, K);
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < B; ++b) {
      float* row = y + (int64_t{t} * B + b) * K;
      if (t < in.lengths[b]) {
        for (int k = 0; k < K; ++k) row[k] += bias[k];
      } else {
        std::fill(row, row + K, 0.0f);
      }
    }
}

void Linear::backward(const Sequences& in, const Sequences& out, const Sequences& grad_out,
                      Sequences& grad_in) {
  DS2_CHECK(grad_out.data.shape() == out.data.shape(),
            name_ << ": gradient shape " << shape_str(grad_out.data.shape())
                  << " differs from the output's " << shape_str(out.data.shape()));
  const int T = static_cast<int>(in.data.dim(0)), B = static_cast<int>(in.data.dim(1));
  const int K = out_features_, rows = T * B;
  masked_grad_.resize({rows, K});
  float* g = masked_grad_.data();
  float* dbias = store_.grad(bias_);
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < B; ++b) {
      const int64_t off = (int64_t{t} * B + b) * K;
      if (t < in.lengths[b]) {
        std::copy(grad_out.data.data() + off, grad_out.data.data() + off + K, g + off);
        for (int k = 0; k < K; ++k) dbias[k] += g[off + k];
      } else {
        std::fill(g + off, g + off + K, 0.0f);
      }
    }
  // dW {K, F} += dY^T {K, rows} * X {rows, F}
  gemm(true, false, K, in_features_, rows, 1.0f, g, K, in.data.data(), in_features_, 1.0f,
       store_.grad(weight_), in_features_);
  if (!needs_input_grad_) return;
  grad_in.data.resize(in.data.shape());
  grad_in.lengths = in.lengths;
  // dX {rows, F} = dY {rows, K} * W {K, F}; padding rows of dY are zero, so are those of dX.
  gemm(false, false, rows, in_features_, K, 1.0f, g, K, store_.value(weight_), in_features_, 0.0f,
       grad_in.data.data(), in_features_);
}

}  // namespace ds2
