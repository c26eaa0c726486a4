// Test helpers for the nn layers: random sequences with poisoned padding, the masked linear loss
// L = sum over valid frames of out * R, and a central-difference gradient check of every
// trainable parameter and every valid input element.
//
//   Differentiable f = wrap_layer(layer, /*training=*/true);
//   GradCheckReport r = check_gradients(f, store, x, rng, GradCheckOptions{});
//   EXPECT_TRUE(r.ok(0.02)) << r.describe();
//
// The numeric side runs the float layer itself; every coordinate must agree within
// atol + rtol * |gradient|. A coordinate that does not is re-measured at eps/4, eps/16, ... (with
// atol scaled up as round-off grows): a step that crossed a ReLU kink or clip, or strong
// curvature, converges to the analytic value, a wrong gradient does not. With allow_kinks a
// coordinate still off at the smallest step is counted as skipped (a kink closer than that step)
// when one of its one-sided quotients matches, or the central one is off by no more than half
// their gap; tests bound the skipped fraction.
#pragma once

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "nn/layer.h"
#include "nn/parameters.h"
#include "nn/sequences.h"
#include "support/sequences_testing.h"

namespace ds2::nn_testing {

using ds2::random_sequences;  // (shape, lengths, rng, lo, hi, padding_value)

// Sum over valid frames of a * r, accumulated in double.
inline double masked_dot(const Sequences& a, const Sequences& r) {
  const int64_t T = a.time(), B = a.batch(), F = a.frame_size();
  double sum = 0.0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      if (t < a.lengths[b])
        for (int64_t i = 0; i < F; ++i)
          sum += static_cast<double>(a.data[(t * B + b) * F + i]) * r.data[(t * B + b) * F + i];
  return sum;
}

using ds2::nonzero_padding;

inline int64_t non_finite(const Tensor& x) {
  int64_t count = 0;
  for (int64_t i = 0; i < x.numel(); ++i) count += !std::isfinite(x[i]);
  return count;
}

// Resizes `s` to `shape` and fills it with NaN, so a forward that skips an element shows.
inline void poison(Sequences& s, const Shape& shape) {
  s.data.resize(shape);
  s.data.fill(std::numeric_limits<float>::quiet_NaN());
}

// A function under test: forward returns its output, backward (given dL/d(out)) its input
// gradient or nullptr when it computes none. Both keep their buffers alive between calls.
struct Differentiable {
  std::function<const Sequences&(const Sequences& in)> forward;
  std::function<const Sequences*(const Sequences& grad_out)> backward;
};

inline Differentiable wrap_layer(Layer& layer, bool training) {
  struct State {
    Sequences in, out, grad_in;
  };
  auto state = std::make_shared<State>();
  Differentiable f;
  f.forward = [&layer, state, training](const Sequences& in) -> const Sequences& {
    state->in = in;
    layer.forward(state->in, state->out, training);
    return state->out;
  };
  f.backward = [&layer, state](const Sequences& grad_out) -> const Sequences* {
    layer.backward(state->in, state->out, grad_out, state->grad_in);
    return layer.needs_input_grad() ? &state->grad_in : nullptr;
  };
  return f;
}

struct GradCheckOptions {
  // eps 3e-3 keeps float round-off in the difference quotient near 1e-5 while stepping over
  // few ReLU kinks; atol 1e-4 is about 1e-4 of the largest gradients of the layer tests.
  float eps = 3e-3f;
  double atol = 1e-4;
  double rtol = 1e-2;
  int refinements = 2;              // re-measure a mismatch at eps/4, eps/16, ... this many times
  int max_checks_per_tensor = 400;  // random subset beyond this
  float grad_padding_value = 5.0f;  // written into R's padding: must not matter
  // For piecewise-smooth functions (ReLU): see the comment at the top.
  bool allow_kinks = false;
};

struct GradCheckReport {
  int checked = 0, skipped = 0, failed = 0;
  int refined = 0;  // passed only at a smaller step (a kink or strong curvature within eps)
  int64_t grad_in_padding_nonzero = 0;
  double worst_ratio = 0.0;  // max over checked, unskipped coordinates of mismatch / tolerance
  double largest_gradient = 0.0;
  std::string worst;
  std::string first_failure;  // the worst mismatch seen when failed is first counted

  bool ok(double max_skipped_fraction) const {
    return checked > 0 && failed == 0 && grad_in_padding_nonzero == 0 &&
           skipped <= max_skipped_fraction * checked;
  }
  std::string describe() const {
    std::ostringstream out;
    out << "checked " << checked << ", refined " << refined << ", skipped (kink) " << skipped
        << ", failed " << failed << ", nonzero grad_in padding " << grad_in_padding_nonzero
        << "; largest |gradient| " << largest_gradient << "; worst (" << worst_ratio
        << " x tolerance): " << worst << "; first failure: " << first_failure;
    return out.str();
  }
};

inline GradCheckReport check_gradients(const Differentiable& f, ParameterStore& store,
                                       const Sequences& input, Rng& rng,
                                       const GradCheckOptions& opt) {
  GradCheckReport report;
  const Sequences& out0 = f.forward(input);
  Sequences r =
      random_sequences(out0.data.shape(), out0.lengths, rng, -1.0f, 1.0f, opt.grad_padding_value);
  store.zero_grads();
  const Sequences* grad_in_ptr = f.backward(r);
  const Tensor analytic_params = store.grads();
  Sequences analytic_input;
  if (grad_in_ptr) {
    analytic_input = *grad_in_ptr;
    report.grad_in_padding_nonzero = nonzero_padding(analytic_input);
  }

  const double loss0 = masked_dot(out0, r);
  Sequences x = input;
  auto check = [&](float* value, double analytic, const std::string& what) {
    const float saved = *value;
    ++report.checked;
    report.largest_gradient = std::max(report.largest_gradient, std::fabs(analytic));
    double ratio = 0.0, numeric = 0.0, one_sided_gap = 0.0;
    auto note_worst = [&](double r, double n, int level) {
      if (r <= report.worst_ratio && !report.worst.empty()) return;
      std::ostringstream s;
      s << what << " analytic " << analytic << " numeric " << n << " at eps/" << (1 << (2 * level));
      report.worst = s.str();
      report.worst_ratio = r;
    };
    for (int level = 0; level <= opt.refinements; ++level) {
      const float eps = opt.eps / static_cast<float>(1 << (2 * level));  // eps, eps/4, ...
      const float up = saved + eps, down = saved - eps;
      *value = up;
      const double loss_up = masked_dot(f.forward(x), r);
      *value = down;
      const double loss_down = masked_dot(f.forward(x), r);
      *value = saved;
      // Steps as actually applied, after float rounding.
      const double step_up = static_cast<double>(up) - saved;
      const double step_down = static_cast<double>(saved) - down;
      numeric = (loss_up - loss_down) / (step_up + step_down);
      const double right = (loss_up - loss0) / step_up, left = (loss0 - loss_down) / step_down;
      one_sided_gap = std::fabs(right - left);
      // Round-off in the quotient grows as 1/eps; the absolute tolerance follows it.
      const double tolerance =
          opt.atol * (opt.eps / eps) + opt.rtol * std::max(std::fabs(analytic), std::fabs(numeric));
      ratio = std::fabs(analytic - numeric) / tolerance;
      if (ratio <= 1.0) {
        report.refined += level > 0;
        note_worst(ratio, numeric, level);
        return;
      }
      // A kink crossed on one side leaves the other side's quotient exact (to O(eps)) and moves
      // the central one by half the gap between the two.
      if (level == opt.refinements && opt.allow_kinks &&
          (std::fabs(analytic - numeric) <= 0.5 * one_sided_gap + tolerance ||
           std::fabs(analytic - left) <= tolerance || std::fabs(analytic - right) <= tolerance)) {
        ++report.skipped;
        return;  // not noted as worst: a skipped coordinate has no meaningful quotient
      }
    }
    ++report.failed;
    note_worst(ratio, numeric, opt.refinements);
    if (report.first_failure.empty()) {
      std::ostringstream s;
      s << what << " analytic " << analytic << " numeric (smallest eps) " << numeric
        << " one-sided gap " << one_sided_gap;
      report.first_failure = s.str();
    }
  };
  // Indices of one tensor to check: all, or a random subset of max_checks_per_tensor.
  auto pick = [&](int64_t n) {
    std::vector<int64_t> idx;
    if (n <= opt.max_checks_per_tensor) {
      for (int64_t i = 0; i < n; ++i) idx.push_back(i);
    } else {
      for (int i = 0; i < opt.max_checks_per_tensor; ++i) idx.push_back(rng.uniform_int(0, n - 1));
    }
    return idx;
  };

  for (const ParamEntry& e : store.parameters())
    for (int64_t i : pick(e.numel))
      check(store.values().data() + e.offset + i, analytic_params[e.offset + i],
            e.name + "[" + std::to_string(i) + "]");

  if (grad_in_ptr) {
    const int64_t B = x.batch(), F = x.frame_size();
    std::vector<int64_t> valid;
    for (int64_t t = 0; t < x.time(); ++t)
      for (int64_t b = 0; b < B; ++b)
        if (t < x.lengths[b])
          for (int64_t i = 0; i < F; ++i) valid.push_back((t * B + b) * F + i);
    for (int64_t k : pick(static_cast<int64_t>(valid.size())))
      check(x.data.data() + valid[k], analytic_input.data[valid[k]],
            "input[" + std::to_string(valid[k]) + "]");
  }
  return report;
}

}  // namespace ds2::nn_testing
