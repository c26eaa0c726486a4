#include "nn/activations.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <sstream>

#include "core/error.h"

namespace ds2 {

void clipped_relu(const float* x, float* y, int64_t n, float clip) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(x[i], 0.0f), clip);
}

namespace {

// g where 0 < y < clip, else +0, as a bit mask. Written as a select, GCC branches around the load
// of g or the add that forms it (neither is computed speculatively, as either may trap) and then
// cannot vectorize the loop: it ran scalar, with a branch an element.
inline float pass_where_unclipped(float y, float g, float clip) {
  uint32_t bits;
  std::memcpy(&bits, &g, sizeof bits);
  bits &= 0u - static_cast<uint32_t>((y > 0.0f) & (y < clip));
  std::memcpy(&g, &bits, sizeof g);
  return g;
}

}  // namespace

void clipped_relu_backward(const float* y, const float* dy, float* dx, int64_t n, float clip) {
  for (int64_t i = 0; i < n; ++i) dx[i] = pass_where_unclipped(y[i], dy[i], clip);
}

void clipped_relu_backward(const float* y, const float* dy, const float* carry, float* dx,
                           int64_t n, float clip) {
  for (int64_t i = 0; i < n; ++i) dx[i] = pass_where_unclipped(y[i], dy[i] + carry[i], clip);
}

ClippedReLU::ClippedReLU(const std::string& name, float clip) : name_(name), clip_(clip) {
  DS2_CHECK(clip > 0.0f, name << ": relu clip must be positive, got " << clip);
}

std::string ClippedReLU::describe() const {
  std::ostringstream out;
  out << "ClippedReLU clip=" << clip_;
  return out.str();
}

void ClippedReLU::forward(const Sequences& in, Sequences& out, bool /*training*/) {
  check_sequences(in, name_);
  out.data.resize(in.data.shape());
  out.lengths = in.lengths;
  clipped_relu(in.data.data(), out.data.data(), in.data.numel(), clip_);
  // Padding of `in` is only promised finite, not zero.
  zero_padding(out);
}

void ClippedReLU::backward(const Sequences& /*in*/, const Sequences& out, const Sequences& grad_out,
                           Sequences& grad_in) {
  if (!needs_input_grad_) return;
  grad_in.data.resize(out.data.shape());
  grad_in.lengths = out.lengths;
  clipped_relu_backward(out.data.data(), grad_out.data.data(), grad_in.data.data(),
                        out.data.numel(), clip_);
  zero_padding(grad_in);
}

}  // namespace ds2
