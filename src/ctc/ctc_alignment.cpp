#include "ctc/ctc_alignment.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/error.h"

namespace ds2 {

std::vector<float> log_softmax_frames(const float* logits, int frames, int classes) {
  std::vector<float> out(static_cast<size_t>(frames) * classes);
  for (int t = 0; t < frames; ++t) {
    const float* x = logits + static_cast<int64_t>(t) * classes;
    float* y = out.data() + static_cast<int64_t>(t) * classes;
    const float top = *std::max_element(x, x + classes);
    double sum = 0;
    for (int k = 0; k < classes; ++k) sum += std::exp(static_cast<double>(x[k]) - top);
    const double log_norm = top + std::log(sum);
    for (int k = 0; k < classes; ++k) y[k] = static_cast<float>(x[k] - log_norm);
  }
  return out;
}

std::vector<int> best_path(const float* scores, int frames, int classes) {
  std::vector<int> path(frames);
  for (int t = 0; t < frames; ++t) {
    const float* x = scores + static_cast<int64_t>(t) * classes;
    path[t] = static_cast<int>(std::max_element(x, x + classes) - x);  // first maximum
  }
  return path;
}

std::vector<int> forced_alignment(const float* log_probs, int frames, int classes,
                                  const std::vector<int>& labels) {
  const int L = static_cast<int>(labels.size());
  for (int l : labels)
    DS2_CHECK(l >= 1 && l < classes,
              "forced_alignment: label " << l << " outside [1, " << classes - 1 << "]");
  int needed = L;  // frames: one per label, plus a blank between equal neighbours
  for (int i = 1; i < L; ++i) needed += labels[i] == labels[i - 1];
  if (frames == 0 || needed > frames) return {};

  // States of the extended sequence: blank, l1, blank, l2, ..., lL, blank.
  const int S = 2 * L + 1;
  auto cls = [&](int s) { return s % 2 ? labels[s / 2] : 0; };
  auto can_skip = [&](int s) { return s % 2 == 1 && s >= 3 && labels[s / 2] != labels[s / 2 - 1]; };
  constexpr double kNone = -std::numeric_limits<double>::infinity();

  // One frame of the recursion: next[s] = best predecessor of s + log p(class of s at frame t);
  // `back` (when given) receives how far back the predecessor lies (0, 1 or 2 states).
  auto step = [&](const std::vector<double>& prev, int t, std::vector<double>& next,
                  uint8_t* back) {
    const float* row = log_probs + static_cast<int64_t>(t) * classes;
    for (int s = 0; s < S; ++s) {
      double best = prev[s];
      uint8_t offset = 0;
      if (s >= 1 && prev[s - 1] > best) {
        best = prev[s - 1];
        offset = 1;
      }
      if (can_skip(s) && prev[s - 2] > best) {
        best = prev[s - 2];
        offset = 2;
      }
      next[s] = best == kNone ? kNone : best + row[cls(s)];
      if (back) back[s] = offset;
    }
  };

  std::vector<double> first(S, kNone);
  first[0] = log_probs[0];
  if (S > 1) first[1] = log_probs[cls(1)];

  // Forward pass keeping only the row that enters each segment of `seg` frames; the backtrack
  // recomputes one segment's backpointers at a time (about sqrt(8 * frames) frames balances the
  // stored rows, 8 bytes per state, against the backpointers, 1 byte per state).
  const int seg = std::max(1, static_cast<int>(std::ceil(std::sqrt(8.0 * frames))));
  const int segments = (frames + seg - 1) / seg;
  std::vector<std::vector<double>> entry(segments);  // entry[k]: row after frame k*seg - 1
  std::vector<double> row = first, next(S);
  for (int t = 1; t < frames; ++t) {
    if (t % seg == 0) entry[t / seg] = row;
    step(row, t, next, nullptr);
    row.swap(next);
  }
  int state = S - 1;
  if (S > 1 && row[S - 2] > row[S - 1]) state = S - 2;
  if (row[state] == kNone) return {};

  std::vector<int> path(frames);
  std::vector<uint8_t> back(static_cast<size_t>(seg) * S);
  for (int k = segments - 1; k >= 0; --k) {
    const int a = k * seg, b = std::min(frames, a + seg);
    row = k == 0 ? first : entry[k];
    for (int t = std::max(a, 1); t < b; ++t) {
      step(row, t, next, back.data() + static_cast<size_t>(t - a) * S);
      row.swap(next);
    }
    for (int t = b - 1; t >= a; --t) {
      path[t] = cls(state);
      if (t > 0) state -= back[static_cast<size_t>(t - a) * S + state];
    }
    entry[k].clear();
    entry[k].shrink_to_fit();
  }
  return path;
}

std::vector<LabelSpan> label_spans(const std::vector<int>& path) {
  std::vector<LabelSpan> spans;
  for (int t = 0; t < static_cast<int>(path.size()); ++t) {
    const int c = path[t];
    if (c == 0) continue;
    if (t > 0 && path[t - 1] == c) {
      spans.back().last = t;
    } else {
      spans.push_back({c, t, t});
    }
  }
  return spans;
}

}  // namespace ds2
