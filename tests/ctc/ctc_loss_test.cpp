#include "ctc/ctc_loss.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"

namespace ds2 {
namespace {

using Labels = std::vector<std::vector<int>>;

const double kInf = std::numeric_limits<double>::infinity();

// Time-major [T, B, K] logits drawn from N(0, 1), in double for finite differences.
std::vector<double> random_logits(int T, int B, int K, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> logits(static_cast<size_t>(T) * B * K);
  for (double& x : logits) x = rng.normal(0.0f, 1.0f);
  return logits;
}

struct Result {
  std::vector<double> losses;
  std::vector<double> gradient;
};

Result run_ctc(const std::vector<double>& logits, int T, int B, int K,
               const std::vector<int>& lengths, const Labels& labels, CtcWorkspace* ws = nullptr) {
  CtcWorkspace local;
  Result r{std::vector<double>(B), std::vector<double>(logits.size(), -123.0)};
  ctc_loss(logits.data(), T, B, K, lengths.data(), labels, r.losses.data(), r.gradient.data(),
           ws ? ws : &local);
  return r;
}

// Independent reference: sums over all K^T frame-level paths of one utterance, keeping those that
// collapse to the label, and accumulates their posterior class occupancy per frame.
struct BruteForce {
  double loss;
  std::vector<double> gradient;  // [T, K] for the utterance's frames
};

// Calls visit(path) for each of the K^frames frame-level paths that collapse to `label`.
template <typename Visit>
void for_each_path_of(const std::vector<int>& label, int frames, int K, Visit visit) {
  std::vector<int> path(frames, 0);
  int64_t n_paths = 1;
  for (int t = 0; t < frames; ++t) n_paths *= K;
  for (int64_t code = 0; code < n_paths; ++code) {
    int64_t c = code;
    for (int t = 0; t < frames; ++t, c /= K) path[t] = static_cast<int>(c % K);
    std::vector<int> collapsed;
    for (int t = 0; t < frames; ++t) {
      if (path[t] != 0 && (t == 0 || path[t] != path[t - 1])) collapsed.push_back(path[t]);
    }
    if (collapsed == label) visit(path);
  }
}

BruteForce brute_force(const std::vector<double>& logits, int B, int K, int b, int frames,
                       const std::vector<int>& label) {
  std::vector<double> prob(static_cast<size_t>(frames) * K);
  for (int t = 0; t < frames; ++t) {
    const double* x = &logits[(static_cast<size_t>(t) * B + b) * K];
    double sum = 0;
    for (int k = 0; k < K; ++k) sum += std::exp(x[k]);
    for (int k = 0; k < K; ++k) prob[t * K + k] = std::exp(x[k]) / sum;
  }
  std::vector<double> occupancy(prob.size(), 0.0);
  double total = 0;
  for_each_path_of(label, frames, K, [&](const std::vector<int>& path) {
    double p = 1;
    for (int t = 0; t < frames; ++t) p *= prob[t * K + path[t]];
    total += p;
    for (int t = 0; t < frames; ++t) occupancy[t * K + path[t]] += p;
  });
  BruteForce out{-std::log(total), std::vector<double>(prob.size(), 0.0)};
  if (total > 0) {
    for (size_t i = 0; i < prob.size(); ++i) out.gradient[i] = prob[i] - occupancy[i] / total;
  }
  return out;
}

// The same enumeration in log space: exact where probabilities underflow a double (logits
// hundreds apart). Each path's log-probability, then log-sum-exp over the paths that collapse to
// the label, and the occupancies as exp(path - total).
BruteForce brute_force_log(const std::vector<double>& logits, int B, int K, int b, int frames,
                           const std::vector<int>& label) {
  std::vector<double> log_prob(static_cast<size_t>(frames) * K);
  for (int t = 0; t < frames; ++t) {
    const double* x = &logits[(static_cast<size_t>(t) * B + b) * K];
    double max_x = x[0];
    for (int k = 1; k < K; ++k) max_x = std::max(max_x, x[k]);
    double sum = 0;
    for (int k = 0; k < K; ++k) sum += std::exp(x[k] - max_x);
    for (int k = 0; k < K; ++k) log_prob[t * K + k] = x[k] - max_x - std::log(sum);
  }
  std::vector<std::vector<int>> paths;
  std::vector<double> path_log_probs;
  for_each_path_of(label, frames, K, [&](const std::vector<int>& path) {
    double lp = 0;
    for (int t = 0; t < frames; ++t) lp += log_prob[t * K + path[t]];
    paths.push_back(path);
    path_log_probs.push_back(lp);
  });
  double best = -kInf;
  for (double lp : path_log_probs) best = std::max(best, lp);
  BruteForce out{kInf, std::vector<double>(log_prob.size(), 0.0)};
  if (best == -kInf) return out;
  double sum = 0;
  for (double lp : path_log_probs) sum += std::exp(lp - best);
  const double total = best + std::log(sum);
  out.loss = -total;
  for (size_t i = 0; i < log_prob.size(); ++i) out.gradient[i] = std::exp(log_prob[i]);
  for (size_t p = 0; p < paths.size(); ++p)
    for (int t = 0; t < frames; ++t)
      out.gradient[t * K + paths[p][t]] -= std::exp(path_log_probs[p] - total);
  return out;
}

double grad_at(const Result& r, int B, int K, int t, int b, int k) {
  return r.gradient[(static_cast<size_t>(t) * B + b) * K + k];
}

TEST(CtcLoss, MinFramesCountsRepeats) {
  EXPECT_EQ(ctc_min_frames({}), 0);
  EXPECT_EQ(ctc_min_frames({1, 2, 3}), 3);
  EXPECT_EQ(ctc_min_frames({1, 1, 2, 2, 2, 1}), 9);
}

TEST(CtcLoss, UniformLogitsKnownValues) {
  // Uniform logits make every frame-level path equally likely: p = (#paths) / K^T.
  // K=2, T=1, "a": only path "a" -> 1/2.
  EXPECT_NEAR(run_ctc({0, 0}, 1, 1, 2, {1}, {{1}}).losses[0], std::log(2.0), 1e-12);
  // K=2, T=2, "a": paths aa, a_, _a -> 3/4. Frame posteriors: a 2/3, blank 1/3.
  Result r = run_ctc({0, 0, 0, 0}, 2, 1, 2, {2}, {{1}});
  EXPECT_NEAR(r.losses[0], -std::log(0.75), 1e-12);
  for (int t = 0; t < 2; ++t) {
    EXPECT_NEAR(grad_at(r, 1, 2, t, 0, 0), 0.5 - 1.0 / 3.0, 1e-12);
    EXPECT_NEAR(grad_at(r, 1, 2, t, 0, 1), 0.5 - 2.0 / 3.0, 1e-12);
  }
  // K=3, T=2, empty label: only "__" -> 1/9, and the gradient pushes everything to blank.
  r = run_ctc(std::vector<double>(6, 0.0), 2, 1, 3, {2}, Labels(1));
  EXPECT_NEAR(r.losses[0], 2 * std::log(3.0), 1e-12);
  EXPECT_NEAR(grad_at(r, 1, 3, 1, 0, 0), 1.0 / 3.0 - 1.0, 1e-12);
  EXPECT_NEAR(grad_at(r, 1, 3, 1, 0, 2), 1.0 / 3.0, 1e-12);
  // K=2, T=3, "aa": the separating blank is forced, only "a_a" -> 1/8.
  EXPECT_NEAR(run_ctc(std::vector<double>(6, 0.0), 3, 1, 2, {3}, {{1, 1}}).losses[0],
              3 * std::log(2.0), 1e-12);
  // K=3, T=3, "ab": paths ab_, a_b, _ab, aab, abb -> 5/27.
  EXPECT_NEAR(run_ctc(std::vector<double>(9, 0.0), 3, 1, 3, {3}, {{1, 2}}).losses[0],
              -std::log(5.0 / 27.0), 1e-12);
}

TEST(CtcLoss, SingleFrameGradientIsSoftmaxMinusOneHot) {
  // softmax(0, ln 2, 0) = (1/4, 1/2, 1/4); one frame must emit label 1.
  Result r = run_ctc({0.0, std::log(2.0), 0.0}, 1, 1, 3, {1}, {{1}});
  EXPECT_NEAR(r.losses[0], std::log(2.0), 1e-12);
  EXPECT_NEAR(r.gradient[0], 0.25, 1e-12);
  EXPECT_NEAR(r.gradient[1], -0.5, 1e-12);
  EXPECT_NEAR(r.gradient[2], 0.25, 1e-12);
}

TEST(CtcLoss, MatchesBruteForceEnumeration) {
  Rng rng(7);
  int cases = 0;
  for (int K = 2; K <= 3; ++K) {
    for (int T = 1; T <= 5; ++T) {
      for (int trial = 0; trial < 4; ++trial) {
        const int B = 2;
        std::vector<int> lengths = {T, static_cast<int>(rng.uniform_int(1, T))};
        Labels labels(B);
        for (int b = 0; b < B; ++b) {
          const int U = static_cast<int>(rng.uniform_int(0, 4));  // sometimes infeasible
          for (int u = 0; u < U; ++u)
            labels[b].push_back(static_cast<int>(rng.uniform_int(1, K - 1)));
        }
        const std::vector<double> logits = random_logits(T, B, K, 100 + cases);
        Result r = run_ctc(logits, T, B, K, lengths, labels);
        for (int b = 0; b < B; ++b) {
          SCOPED_TRACE(testing::Message() << "K=" << K << " T=" << T << " b=" << b
                                          << " frames=" << lengths[b] << " U=" << labels[b].size());
          BruteForce ref = brute_force(logits, B, K, b, lengths[b], labels[b]);
          if (std::isinf(ref.loss)) {
            EXPECT_EQ(r.losses[b], kInf);
          } else {
            EXPECT_NEAR(r.losses[b], ref.loss, 1e-10 * (1 + ref.loss));
          }
          for (int t = 0; t < lengths[b]; ++t)
            for (int k = 0; k < K; ++k)
              EXPECT_NEAR(grad_at(r, B, K, t, b, k), ref.gradient[t * K + k], 1e-10);
        }
        ++cases;
      }
    }
  }
}

TEST(CtcLoss, ImpossibleAlignmentGivesInfiniteLossAndZeroGradient) {
  const int T = 4, B = 3, K = 4;
  const std::vector<double> logits = random_logits(T, B, K, 3);
  // "aaa" needs 5 frames; "abc" needs 3 but gets 2; the last one is feasible.
  const Labels labels = {{1, 1, 1}, {1, 2, 3}, {2, 2}};
  const std::vector<int> lengths = {4, 2, 3};
  Result r = run_ctc(logits, T, B, K, lengths, labels);
  EXPECT_EQ(r.losses[0], kInf);
  EXPECT_EQ(r.losses[1], kInf);
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < 2; ++b)
      for (int k = 0; k < K; ++k) EXPECT_EQ(grad_at(r, B, K, t, b, k), 0.0);
  // The feasible utterance is unaffected by its infeasible neighbours.
  BruteForce ref = brute_force(logits, B, K, 2, 3, {2, 2});
  EXPECT_NEAR(r.losses[2], ref.loss, 1e-10);
  for (int t = 0; t < 3; ++t)
    for (int k = 0; k < K; ++k)
      EXPECT_NEAR(grad_at(r, B, K, t, 2, k), ref.gradient[t * K + k], 1e-10);
}

TEST(CtcLoss, ZeroFramesEmitOnlyTheEmptyLabel) {
  Result r = run_ctc(std::vector<double>(2 * 2 * 3, 1.0), 2, 2, 3, {0, 0}, {{}, {1}});
  EXPECT_EQ(r.losses[0], 0.0);
  EXPECT_EQ(r.losses[1], kInf);
  for (double g : r.gradient) EXPECT_EQ(g, 0.0);
}

TEST(CtcLoss, ZeroProbabilityPathsGiveInfiniteLossNotNaN) {
  // Label 1 is impossible when its logit is -inf at every frame, though the length is enough.
  const double neg_inf = -kInf;
  Result r = run_ctc({0.0, neg_inf, 0.0, 0.0, neg_inf, 0.0}, 2, 1, 3, {2}, {{1}});
  EXPECT_EQ(r.losses[0], kInf);
  for (double g : r.gradient) EXPECT_EQ(g, 0.0);
}

// Probabilities too small for a double (label 1's logit 800 below the others at every frame):
// the scaled recursions' final likelihood underflows and the utterance is computed in log space.
// Every path emits label 1 on a run of frames and blanks elsewhere; runs of one frame carry all
// but e^-800 of the mass: p = 4 (e^-800 / 2) (1/2)^3, the loss 800 + log 4.
TEST(CtcLoss, UnderflowingProbabilitiesFallBackToLogSpace) {
  const int T = 4, K = 3;
  std::vector<double> logits;
  for (int t = 0; t < T; ++t) logits.insert(logits.end(), {0.0, -800.0, 0.0});
  const Result r = run_ctc(logits, T, 1, K, {T}, {{1}});
  EXPECT_NEAR(r.losses[0], 800.0 + std::log(4.0), 1e-9);
  for (int t = 0; t < T; ++t) {
    // Occupancy: blank on the other 3 frames of 4 placements, label 1 once in 4.
    EXPECT_NEAR(grad_at(r, 1, K, t, 0, 0), 0.5 - 0.75, 1e-12);
    EXPECT_NEAR(grad_at(r, 1, K, t, 0, 1), -0.25, 1e-12);
    EXPECT_NEAR(grad_at(r, 1, K, t, 0, 2), 0.5, 1e-12);
  }
}

// Logits 100-400 apart: a probability-space lattice loses paths to underflow, including paths
// that dominate the likelihood in the end (such cases gave losses hundreds of nats off before
// cells were checked), so these utterances must come out of the log-space recursions, equal to
// the log-space enumeration.
TEST(CtcLoss, ExtremeLogitsMatchTheLogSpaceEnumeration) {
  const int T = 7, K = 3;
  Rng rng(41);
  int checked = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const double scale = 100.0 * (1 + trial % 4);
    std::vector<double> logits = random_logits(T, 1, K, 500 + trial);
    for (double& x : logits) x *= scale;
    std::vector<int> label(1 + trial % 2);
    for (int& c : label) c = static_cast<int>(rng.uniform_int(1, K - 1));
    SCOPED_TRACE("trial " + std::to_string(trial));
    const Result r = run_ctc(logits, T, 1, K, {T}, {label});
    const BruteForce ref = brute_force_log(logits, 1, K, 0, T, label);
    if (!std::isfinite(ref.loss)) {
      EXPECT_EQ(r.losses[0], kInf);
      continue;
    }
    ++checked;
    EXPECT_NEAR(r.losses[0], ref.loss, 1e-9 * std::max(1.0, ref.loss));
    for (size_t i = 0; i < ref.gradient.size(); ++i)
      EXPECT_NEAR(r.gradient[i], ref.gradient[i], 1e-9) << "logit " << i;
  }
  EXPECT_GT(checked, 20);
}

// Central differences of the summed loss in double precision.
void expect_gradient_matches_finite_differences(int T, int K, const std::vector<int>& lengths,
                                                const Labels& labels, uint64_t seed) {
  const int B = static_cast<int>(lengths.size());
  std::vector<double> logits = random_logits(T, B, K, seed);
  CtcWorkspace ws;
  const Result r = run_ctc(logits, T, B, K, lengths, labels, &ws);
  std::vector<double> losses(B);
  auto total_loss = [&] {
    ctc_loss(logits.data(), T, B, K, lengths.data(), labels, losses.data(), nullptr, &ws);
    double sum = 0;
    for (double l : losses) sum += l;
    return sum;
  };
  const double h = 1e-5;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double saved = logits[i];
    logits[i] = saved + h;
    const double plus = total_loss();
    logits[i] = saved - h;
    const double minus = total_loss();
    logits[i] = saved;
    EXPECT_NEAR(r.gradient[i], (plus - minus) / (2 * h), 1e-7) << "logit " << i;
  }
}

TEST(CtcLoss, GradientMatchesFiniteDifferencesInABatch) {
  // Odd K, different lengths (padding in two utterances), repeated labels, an empty label.
  expect_gradient_matches_finite_differences(7, 5, {7, 4, 6, 3}, {{1, 2, 2}, {3}, {4, 1, 4, 4}, {}},
                                             11);
}

TEST(CtcLoss, GradientMatchesFiniteDifferencesBatchOfOne) {
  expect_gradient_matches_finite_differences(6, 3, {6}, {{2, 1, 1}}, 12);
}

TEST(CtcLoss, PaddingFramesHaveZeroGradientAndNoInfluence) {
  const int T = 6, B = 2, K = 4;
  std::vector<double> logits = random_logits(T, B, K, 21);
  const std::vector<int> lengths = {3, 6};
  const Labels labels = {{1, 2}, {3, 3}};
  const Result before = run_ctc(logits, T, B, K, lengths, labels);
  for (int t = lengths[0]; t < T; ++t)
    for (int k = 0; k < K; ++k) {
      EXPECT_EQ(grad_at(before, B, K, t, 0, k), 0.0);
      logits[(t * B + 0) * K + k] = 1e3 * (k + 1);  // garbage in the padding
    }
  const Result after = run_ctc(logits, T, B, K, lengths, labels);
  EXPECT_EQ(after.losses, before.losses);
  EXPECT_EQ(after.gradient, before.gradient);
}

TEST(CtcLoss, LongLabelMatchesAlignmentCount) {
  // With uniform logits, p = (#alignments) / K^T, and the number of alignments of a U-label
  // sequence with r adjacent repeats over T frames is C(T + U - r, 2U): lay out 2U+1 runs (U
  // label runs of length >= 1, blank runs >= 0, the r blank runs between repeats >= 1).
  const int T = 700, K = 29, U = 300;
  Rng rng(5);
  std::vector<int> label(U);
  for (int& c : label) c = static_cast<int>(rng.uniform_int(1, 4));  // small range: many repeats
  const int repeats = ctc_min_frames(label) - U;
  ASSERT_GT(repeats, 10);
  ASSERT_LE(U + repeats, T);
  const Result r =
      run_ctc(std::vector<double>(static_cast<size_t>(T) * K, 0.0), T, 1, K, {T}, {label});
  const double n = T + U - repeats, k = 2 * U;
  const double log_alignments = std::lgamma(n + 1) - std::lgamma(k + 1) - std::lgamma(n - k + 1);
  const double expected = T * std::log(static_cast<double>(K)) - log_alignments;
  EXPECT_NEAR(r.losses[0], expected, 1e-9 * expected);
  // Softmax and posterior occupancy each sum to 1 per frame, so every gradient row sums to 0.
  for (int t = 0; t < T; ++t) {
    double row = 0;
    for (int c = 0; c < K; ++c) row += r.gradient[t * K + c];
    ASSERT_NEAR(row, 0.0, 1e-9) << "frame " << t;
  }
}

TEST(CtcLoss, LongLabelWithRandomLogitsIsFinite) {
  const int T = 700, K = 29, U = 300;
  Rng rng(6);
  std::vector<int> label(U);
  for (int& c : label) c = static_cast<int>(rng.uniform_int(1, K - 1));
  const Result r = run_ctc(random_logits(T, 1, K, 8), T, 1, K, {T}, {label});
  EXPECT_TRUE(std::isfinite(r.losses[0]));
  // Each label frame costs at least log(1) and the random logits give roughly log K per frame.
  EXPECT_GT(r.losses[0], U * std::log(2.0));
  for (double g : r.gradient) ASSERT_TRUE(std::isfinite(g) && std::fabs(g) <= 1.0);
}

TEST(CtcLoss, FloatMatchesDouble) {
  const int T = 9, B = 3, K = 6;
  const std::vector<double> logits = random_logits(T, B, K, 31);
  const std::vector<int> lengths = {9, 5, 7};
  const Labels labels = {{1, 5, 5, 2}, {3, 4}, {2}};
  const Result ref = run_ctc(logits, T, B, K, lengths, labels);
  std::vector<float> logits_f(logits.begin(), logits.end());
  std::vector<float> grad_f(logits.size());
  std::vector<double> losses_f(B);
  CtcWorkspace ws;
  ctc_loss(logits_f.data(), T, B, K, lengths.data(), labels, losses_f.data(), grad_f.data(), &ws);
  for (int b = 0; b < B; ++b) EXPECT_NEAR(losses_f[b], ref.losses[b], 1e-5);
  for (size_t i = 0; i < grad_f.size(); ++i) EXPECT_NEAR(grad_f[i], ref.gradient[i], 1e-6);
}

TEST(CtcLoss, SequencesOverloadMatchesPointerApi) {
  const int T = 5, B = 2, K = 4;
  const std::vector<double> logits = random_logits(T, B, K, 41);
  Sequences in;
  in.data.resize({T, B, K});
  for (size_t i = 0; i < logits.size(); ++i) in.data[i] = static_cast<float>(logits[i]);
  in.lengths = {5, 3};
  const Labels labels = {{1, 2}, {3}};
  std::vector<double> losses;
  Sequences grad;
  CtcWorkspace ws;
  ctc_loss(in, labels, &losses, &grad, &ws);
  const Result ref = run_ctc(logits, T, B, K, in.lengths, labels);
  ASSERT_EQ(losses.size(), 2u);
  EXPECT_EQ(grad.data.shape(), in.data.shape());
  EXPECT_EQ(grad.lengths, in.lengths);
  for (int b = 0; b < B; ++b) EXPECT_NEAR(losses[b], ref.losses[b], 1e-5);
  for (size_t i = 0; i < logits.size(); ++i) EXPECT_NEAR(grad.data[i], ref.gradient[i], 1e-6);
}

TEST(CtcLoss, WorkspaceIsReusedWithoutReallocation) {
  const int K = 5;
  CtcWorkspace ws;
  const std::vector<double> big = random_logits(8, 1, K, 51);
  const Result first = run_ctc(big, 8, 1, K, {8}, {{1, 2, 3}}, &ws);
  ASSERT_EQ(ws.parts.size(), 1u);  // batch 1: one part
  const double* alpha = ws.parts[0].alpha.data();
  const double* beta = ws.parts[0].beta.data();
  run_ctc(random_logits(4, 1, K, 52), 4, 1, K, {4}, {{4}}, &ws);
  const Result again = run_ctc(big, 8, 1, K, {8}, {{1, 2, 3}}, &ws);
  EXPECT_EQ(ws.parts[0].alpha.data(), alpha);
  EXPECT_EQ(ws.parts[0].beta.data(), beta);
  EXPECT_EQ(again.losses, first.losses);
  EXPECT_EQ(again.gradient, first.gradient);
}

TEST(CtcLoss, RejectsInconsistentArguments) {
  const std::vector<double> logits(2 * 1 * 3, 0.0);
  CtcWorkspace ws;
  double loss;
  const int length = 2, too_long = 3;
  EXPECT_THROW(ctc_loss(logits.data(), 2, 1, 3, &length, {{3}}, &loss, nullptr, &ws), Error);
  EXPECT_THROW(ctc_loss(logits.data(), 2, 1, 3, &length, {{0}}, &loss, nullptr, &ws), Error);
  EXPECT_THROW(ctc_loss(logits.data(), 2, 1, 3, &too_long, {{1}}, &loss, nullptr, &ws), Error);
  EXPECT_THROW(ctc_loss(logits.data(), 2, 1, 3, &length, {{1}, {1}}, &loss, nullptr, &ws), Error);
  EXPECT_THROW(ctc_loss(logits.data(), 2, 1, 3, &length, {{1}}, &loss, nullptr, nullptr), Error);
}

}  // namespace
}  // namespace ds2
