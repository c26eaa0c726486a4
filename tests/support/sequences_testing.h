// Test helpers for Sequences, shared by the CPU layer tests and the CPU-vs-CUDA tests: random
// valid frames with a chosen (finite, usually nonzero) padding that layers must ignore, and a
// count of padding elements a layer failed to leave at exactly zero.
//
//   ds2::Sequences x = ds2::random_sequences({T, B, F}, {T, T - 3}, rng, -1, 1, /*padding=*/3);
//   EXPECT_EQ(ds2::nonzero_padding(y), 0);
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "nn/sequences.h"

namespace ds2 {

// Valid frames uniform in [lo, hi] (drawn in frame order, valid frames only); padding frames
// set to `padding_value`.
inline Sequences random_sequences(const Shape& shape, const std::vector<int>& lengths, Rng& rng,
                                  float lo = -1.0f, float hi = 1.0f, float padding_value = 0.0f) {
  Sequences s;
  s.data.resize(shape);
  s.lengths = lengths;
  const int64_t T = shape[0], B = shape[1], F = s.frame_size();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < F; ++i)
        s.data[(t * B + b) * F + i] = t < lengths[b] ? rng.uniform(lo, hi) : padding_value;
  return s;
}

// Number of padding elements (frames t >= lengths[b]) that are not exactly zero; NaN counts.
inline int64_t nonzero_padding(const Tensor& data, const std::vector<int>& lengths) {
  const int64_t T = data.dim(0), B = data.dim(1);
  const int64_t F = T * B > 0 ? data.numel() / (T * B) : 0;
  int64_t count = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      if (t >= lengths[b])
        for (int64_t i = 0; i < F; ++i) count += !(data[(t * B + b) * F + i] == 0.0f);
  return count;
}
inline int64_t nonzero_padding(const Sequences& s) {
  return nonzero_padding(s.data, s.lengths);
}

}  // namespace ds2
