#include "nn/dropout.h"

#include <algorithm>
#include <random>
#include <sstream>
#include <stdexcept>

#include "core/cpu_threads.h"
#include "core/dropout_mask.h"
#include "core/error.h"
#include "core/parse_number.h"

namespace ds2 {

namespace {
// Below this a part's hand-over to a helper thread costs about what the hashing saves.
constexpr int64_t kMinElementsAPart = 1 << 15;
}  // namespace

Dropout::Dropout(const std::string& name, float probability)
    : name_(name), probability_(probability) {
  DS2_CHECK(probability >= 0.0f && probability < 1.0f,
            name << ": dropout probability must be in [0, 1), got " << probability);
}

uint64_t dropout_seed_from_state(const std::string& state) {
  uint64_t seed = 0;
  if (parse_uint64(state, &seed)) return seed;
  // An older build's std::mt19937_64 state: that stream cannot continue on counter-based
  // masks, so fresh ones start from a seed the state determines.
  std::istringstream in(state);
  std::mt19937_64 legacy;
  if (!(in >> legacy)) throw std::invalid_argument("bad dropout random state");
  return legacy();
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
  const uint64_t seed = next_seed_++;
  float* s = scale_.data();
  // Each element's draw depends only on (seed, index): the compute threads take a block each.
  const int parts = static_cast<int>(std::min<int64_t>(cpu_threads(), n / kMinElementsAPart + 1));
  run_parts(parts, [&](int part) {
    const int64_t end = n * (part + 1) / parts;
    for (int64_t i = n * part / parts; i < end; ++i) {
      s[i] = dropout_scale(seed, static_cast<uint64_t>(i), probability_);
      y[i] = x[i] * s[i];
    }
  });
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
