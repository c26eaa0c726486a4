#include "ctc/ctc_loss.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/cpu_threads.h"
#include "core/error.h"

namespace ds2 {
namespace {

constexpr double kLogZero = -std::numeric_limits<double>::infinity();
constexpr int kBlank = 0;

// log(exp(a) + exp(b)) without overflow; exact when either side is log(0).
double log_add(double a, double b) {
  if (a == kLogZero) return b;
  if (b == kLogZero) return a;
  const double hi = std::max(a, b);
  return hi + std::log1p(std::exp(-std::fabs(a - b)));
}

template <typename T>
void grow(std::vector<T>& buffer, size_t size) {
  if (buffer.size() < size) buffer.resize(size);
}

// Fills `log_probs` [frames, K] with the log-softmax of one utterance's valid frames.
template <typename Real>
void log_softmax(const Real* logits, int frames, int batch, int utterance, int K,
                 double* log_probs) {
  for (int t = 0; t < frames; ++t) {
    const Real* x = logits + (static_cast<int64_t>(t) * batch + utterance) * K;
    double* out = log_probs + static_cast<int64_t>(t) * K;
    double max_x = static_cast<double>(x[0]);
    for (int k = 1; k < K; ++k) max_x = std::max(max_x, static_cast<double>(x[k]));
    double sum = 0.0;
    for (int k = 0; k < K; ++k) sum += std::exp(static_cast<double>(x[k]) - max_x);
    const double log_norm = max_x + std::log(sum);
    for (int k = 0; k < K; ++k) out[k] = static_cast<double>(x[k]) - log_norm;
  }
}

// A path may jump from extended position s-2 to s only over a blank separating two different
// labels; between equal labels the blank is mandatory.
bool can_skip_to(const int* extended, int s) {
  return s >= 2 && extended[s] != kBlank && extended[s] != extended[s - 2];
}

// alpha[t][s]: log probability of emitting frames 0..t and being at extended position s at t.
void forward_pass(const double* log_probs, int frames, int K, const int* extended, int S,
                  double* alpha) {
  std::fill(alpha, alpha + static_cast<int64_t>(frames) * S, kLogZero);
  alpha[0] = log_probs[extended[0]];
  if (S > 1) alpha[1] = log_probs[extended[1]];
  for (int t = 1; t < frames; ++t) {
    const double* prev = alpha + static_cast<int64_t>(t - 1) * S;
    double* cur = alpha + static_cast<int64_t>(t) * S;
    const double* lp = log_probs + static_cast<int64_t>(t) * K;
    for (int s = 0; s < S; ++s) {
      double sum = prev[s];
      if (s >= 1) sum = log_add(sum, prev[s - 1]);
      if (can_skip_to(extended, s)) sum = log_add(sum, prev[s - 2]);
      if (sum != kLogZero) cur[s] = sum + lp[extended[s]];
    }
  }
}

// beta[t][s]: log probability of emitting frames t+1..frames-1 given position s at t. Leaving
// frame t's own emission out of beta means alpha + beta is the path mass through (t, s) directly.
void backward_pass(const double* log_probs, int frames, int K, const int* extended, int S,
                   double* beta) {
  std::fill(beta, beta + static_cast<int64_t>(frames) * S, kLogZero);
  double* last = beta + static_cast<int64_t>(frames - 1) * S;
  last[S - 1] = 0.0;
  if (S > 1) last[S - 2] = 0.0;
  for (int t = frames - 2; t >= 0; --t) {
    const double* next = beta + static_cast<int64_t>(t + 1) * S;
    double* cur = beta + static_cast<int64_t>(t) * S;
    const double* lp = log_probs + static_cast<int64_t>(t + 1) * K;
    for (int s = 0; s < S; ++s) {
      double sum = next[s] + lp[extended[s]];
      if (s + 1 < S) sum = log_add(sum, next[s + 1] + lp[extended[s + 1]]);
      if (s + 2 < S && can_skip_to(extended, s + 2)) {
        sum = log_add(sum, next[s + 2] + lp[extended[s + 2]]);
      }
      cur[s] = sum;
    }
  }
}

// The scaled recursions lose a path's mass where it falls below the smallest normal double
// (a product of a cell and an emission, a rescaled cell, a cell's product with its beta). Mostly
// harmless (a blank run far behind the frame's mass), but paths flushed early can be the ones
// that carry the likelihood in the end: logits ~300 apart gave losses hundreds of nats off. So
// each frame records a bound on what it flushed, and the posterior of that mass, at most
// flushed[t] 3 S kSmallestNormal / Z_t (a flushed beta cell feeds 3; Z_t: the frame's sum of alpha
// beta, in the scaled units), must be negligible; else the utterance is computed again in log
// space, which keeps every path.
constexpr double kSmallestNormal = std::numeric_limits<double>::min();
constexpr double kNegligiblePosterior = 1e-30;

// Whether x, the product of two positive factors, has fallen below kSmallestNormal.
inline bool underflowed(double x) {
  return x < kSmallestNormal;
}

// Divides cur[0, S) by its sum and returns the sum (0 where it is below kSmallestNormal: nothing
// to rescale). `flushed` gets the bound of this frame's flushed mass in the rescaled units: the
// cells below kSmallestNormal before the division (`small`) scaled by it, or a cell it pushed
// below kSmallestNormal.
double rescale(double* cur, int S, bool small, double& flushed) {
  double sum = 0.0;
  for (int s = 0; s < S; ++s) sum += cur[s];
  if (!(sum >= kSmallestNormal)) return 0.0;
  const double inverse = 1.0 / sum;
  bool pushed = false;
  for (int s = 0; s < S; ++s) {
    cur[s] *= inverse;
    pushed |= (cur[s] != 0.0) & underflowed(cur[s]);
  }
  flushed += (small || pushed) ? std::max(1.0, inverse) : 0.0;
  return sum;
}

// The same recursions in probability space, each frame's alpha (beta) divided by its sum so that
// a frame's cells stay near 1 (Rabiner's scaling; Graves et al. 2006, section 4.1): no exp or log
// per lattice cell (GCC leaves the loops that also test for underflow scalar; the backward's sums
// vectorize). `probs`
// [frames, K] is the softmax; `skip[s]` 1 where s may be reached from s - 2 (can_skip_to), else 0;
// `emission` [S] scratch; flushed[t] set to frame t's bound (0: nothing flushed). Returns the
// log-likelihood, or NaN where a frame or the end has no normal mass left. alpha keeps the scaled
// values, which are all the occupancies need: alpha[t][s] beta[t][s] over its sum across s is the
// posterior of (t, s) whatever each frame's scale.
double scaled_forward_pass(const double* probs, int frames, int K, const int* extended,
                           const double* skip, int S, double* emission, double* alpha,
                           double* flushed) {
  constexpr double kLost = std::numeric_limits<double>::quiet_NaN();
  double log_likelihood = 0.0;
  for (int t = 0; t < frames; ++t) {
    const double* p = probs + static_cast<int64_t>(t) * K;
    for (int s = 0; s < S; ++s) emission[s] = p[extended[s]];
    double* cur = alpha + static_cast<int64_t>(t) * S;
    bool small = false;
    if (t == 0) {
      std::fill(cur, cur + S, 0.0);
      for (int s = 0; s < std::min(S, 2); ++s) {
        cur[s] = emission[s];
        small |= (cur[s] != 0.0) & underflowed(cur[s]);
      }
    } else {
      const double* prev = cur - S;
      for (int s = 0; s < S; ++s) {
        const double in =
            prev[s] + (s >= 1 ? prev[s - 1] : 0.0) + (s >= 2 ? skip[s] * prev[s - 2] : 0.0);
        cur[s] = in * emission[s];
        small |= (in > 0.0) & (emission[s] > 0.0) & underflowed(cur[s]);
      }
    }
    flushed[t] = 0.0;
    const double sum = rescale(cur, S, small, flushed[t]);
    if (sum == 0.0) return kLost;
    log_likelihood += std::log(sum);
  }
  const double* last = alpha + static_cast<int64_t>(frames - 1) * S;
  const double end = S > 1 ? last[S - 1] + last[S - 2] : last[S - 1];
  if (!(end >= kSmallestNormal)) return kLost;
  return log_likelihood + std::log(end);
}

// beta scaled the same way (frame t's own emission left out, as in backward_pass), adding each
// frame's bound to flushed[t]. False where a frame has no normal mass left.
bool scaled_backward_pass(const double* probs, int frames, int K, const int* extended,
                          const double* skip, int S, double* emission, double* beta,
                          double* flushed) {
  double* last = beta + static_cast<int64_t>(frames - 1) * S;
  std::fill(last, last + S, 0.0);
  last[S - 1] = 1.0;
  if (S > 1) last[S - 2] = 1.0;
  for (int t = frames - 2; t >= 0; --t) {
    const double* p = probs + static_cast<int64_t>(t + 1) * K;
    const double* next = beta + static_cast<int64_t>(t + 1) * S;
    double* cur = beta + static_cast<int64_t>(t) * S;
    // emission-weighted next frame: what each position at t hands on to its successors
    bool small = false;
    for (int s = 0; s < S; ++s) {
      const double e = p[extended[s]];
      emission[s] = next[s] * e;
      small |= (next[s] > 0.0) & (e > 0.0) & underflowed(emission[s]);
    }
    for (int s = 0; s + 2 < S; ++s)
      cur[s] = emission[s] + emission[s + 1] + skip[s + 2] * emission[s + 2];
    if (S > 1) cur[S - 2] = emission[S - 2] + emission[S - 1];
    cur[S - 1] = emission[S - 1];
    if (rescale(cur, S, small, flushed[t]) == 0.0) return false;
  }
  return true;
}

// Frame t's posterior occupancies from the scaled alpha and beta into `occupancy` [K]; false
// where the mass the recursions flushed at t (flushed[t], and products of alpha and beta that
// underflow here) may carry a posterior above kNegligiblePosterior.
bool scaled_occupancy(const double* a, const double* b, const int* extended, int S, int K,
                      double flushed, double* mass, double* occupancy) {
  double total = 0.0;
  bool small = false;
  for (int s = 0; s < S; ++s) {
    mass[s] = a[s] * b[s];
    total += mass[s];
    small |= (a[s] > 0.0) & (b[s] > 0.0) & underflowed(mass[s]);
  }
  if (!(total >= kSmallestNormal)) return false;
  flushed += small ? 1.0 : 0.0;
  if (flushed * 3 * S * kSmallestNormal > kNegligiblePosterior * total) return false;
  const double inverse = 1.0 / total;
  std::fill(occupancy, occupancy + K, 0.0);
  for (int s = 0; s < S; ++s) occupancy[extended[s]] += mass[s] * inverse;
  return true;
}

template <typename Real>
void zero_utterance_gradient(Real* gradient, int first_frame, int max_frames, int batch,
                             int utterance, int K) {
  for (int t = first_frame; t < max_frames; ++t) {
    Real* g = gradient + (static_cast<int64_t>(t) * batch + utterance) * K;
    std::fill(g, g + K, Real(0));
  }
}

// The loss (and, when asked, the gradient rows of the valid frames) of one utterance whose
// extended label and log-softmax are in `ws`, by the scaled recursions; NaN where mass that may
// matter underflowed, and then the gradient rows written so far are to be overwritten.
template <typename Real>
double scaled_utterance_loss(int frames, int batch, int utterance, int K, int S, Real* gradient,
                             CtcUtteranceWorkspace& ws) {
  constexpr double kLost = std::numeric_limits<double>::quiet_NaN();
  const int* extended = ws.extended.data();
  double* probs = ws.probs.data();
  const double* log_probs = ws.log_probs.data();
  for (int64_t i = 0; i < static_cast<int64_t>(frames) * K; ++i) probs[i] = std::exp(log_probs[i]);
  double* skip = ws.skip.data();
  for (int s = 0; s < S; ++s) skip[s] = can_skip_to(extended, s) ? 1.0 : 0.0;
  double* alpha = ws.alpha.data();
  double* emission = ws.emission.data();
  double* flushed = ws.flushed.data();
  const double log_likelihood =
      scaled_forward_pass(probs, frames, K, extended, skip, S, emission, alpha, flushed);
  if (std::isnan(log_likelihood)) return kLost;
  // The loss alone is exact when the forward flushed nothing; else beta tells what it was worth.
  bool forward_flushed = false;
  for (int t = 0; t < frames; ++t) forward_flushed |= flushed[t] != 0.0;
  if (!gradient && !forward_flushed) return -log_likelihood;

  double* beta = ws.beta.data();
  if (!scaled_backward_pass(probs, frames, K, extended, skip, S, emission, beta, flushed))
    return kLost;
  double* occupancy = ws.occupancy.data();
  for (int t = 0; t < frames; ++t) {
    const double* a = alpha + static_cast<int64_t>(t) * S;
    const double* b = beta + static_cast<int64_t>(t) * S;
    if (!scaled_occupancy(a, b, extended, S, K, flushed[t], emission, occupancy)) return kLost;
    if (!gradient) continue;
    const double* p = probs + static_cast<int64_t>(t) * K;
    Real* g = gradient + (static_cast<int64_t>(t) * batch + utterance) * K;
    for (int k = 0; k < K; ++k) g[k] = static_cast<Real>(p[k] - occupancy[k]);
  }
  return -log_likelihood;
}

// Loss of one utterance; writes its gradient rows for all max_frames frames when asked.
template <typename Real>
double utterance_loss(const Real* logits, int max_frames, int batch, int utterance, int K,
                      int frames, const std::vector<int>& label, Real* gradient,
                      CtcUtteranceWorkspace& ws) {
  const double infeasible = std::numeric_limits<double>::infinity();
  if (frames == 0 || frames < ctc_min_frames(label)) {
    if (gradient) zero_utterance_gradient(gradient, 0, max_frames, batch, utterance, K);
    // Zero frames emit exactly the empty label.
    return (frames == 0 && label.empty()) ? 0.0 : infeasible;
  }

  const int S = 2 * static_cast<int>(label.size()) + 1;
  const size_t lattice = static_cast<size_t>(frames) * S;
  grow(ws.log_probs, static_cast<size_t>(frames) * K);
  grow(ws.probs, static_cast<size_t>(frames) * K);
  grow(ws.alpha, lattice);
  grow(ws.beta, lattice);
  grow(ws.occupancy, static_cast<size_t>(K));
  grow(ws.extended, static_cast<size_t>(S));
  grow(ws.skip, static_cast<size_t>(S));
  grow(ws.emission, static_cast<size_t>(S));
  grow(ws.flushed, static_cast<size_t>(frames));

  int* extended = ws.extended.data();
  for (int s = 0; s < S; ++s) extended[s] = (s % 2 == 0) ? kBlank : label[s / 2];
  double* log_probs = ws.log_probs.data();
  log_softmax(logits, frames, batch, utterance, K, log_probs);

  const double scaled = scaled_utterance_loss(frames, batch, utterance, K, S, gradient, ws);
  if (!std::isnan(scaled)) {
    if (gradient) zero_utterance_gradient(gradient, frames, max_frames, batch, utterance, K);
    return scaled;
  }

  // Mass that may matter underflowed in the scaled form: log space, exact for every path.
  double* alpha = ws.alpha.data();
  forward_pass(log_probs, frames, K, extended, S, alpha);
  const double* alpha_last = alpha + static_cast<int64_t>(frames - 1) * S;
  const double log_likelihood =
      (S > 1) ? log_add(alpha_last[S - 1], alpha_last[S - 2]) : alpha_last[S - 1];
  // Feasible by length but every path has probability 0 (logits of -inf): same treatment as an
  // infeasible label, since no finite gradient can raise the likelihood.
  if (log_likelihood == kLogZero) {
    if (gradient) zero_utterance_gradient(gradient, 0, max_frames, batch, utterance, K);
    return infeasible;
  }
  if (!gradient) return -log_likelihood;

  double* beta = ws.beta.data();
  double* occupancy = ws.occupancy.data();
  backward_pass(log_probs, frames, K, extended, S, beta);
  for (int t = 0; t < frames; ++t) {
    const double* a = alpha + static_cast<int64_t>(t) * S;
    const double* b = beta + static_cast<int64_t>(t) * S;
    std::fill(occupancy, occupancy + K, 0.0);
    for (int s = 0; s < S; ++s) {
      const double log_mass = a[s] + b[s];
      if (log_mass != kLogZero) occupancy[extended[s]] += std::exp(log_mass - log_likelihood);
    }
    const double* lp = log_probs + static_cast<int64_t>(t) * K;
    Real* g = gradient + (static_cast<int64_t>(t) * batch + utterance) * K;
    for (int k = 0; k < K; ++k) g[k] = static_cast<Real>(std::exp(lp[k]) - occupancy[k]);
  }
  zero_utterance_gradient(gradient, frames, max_frames, batch, utterance, K);
  return -log_likelihood;
}

template <typename Real>
void ctc_loss_impl(const Real* logits, int max_frames, int batch, int alphabet_size,
                   const int* input_lengths, const std::vector<std::vector<int>>& labels,
                   double* losses, Real* gradient, CtcWorkspace* workspace) {
  DS2_CHECK(max_frames >= 0 && batch >= 0,
            "ctc_loss: bad shape [" << max_frames << ", " << batch << ", " << alphabet_size << "]");
  DS2_CHECK(alphabet_size >= 1,
            "ctc_loss: alphabet_size must be >= 1 (blank), got " << alphabet_size);
  DS2_CHECK(static_cast<int>(labels.size()) == batch,
            "ctc_loss: " << labels.size() << " label sequences for a batch of " << batch);
  DS2_CHECK(workspace != nullptr, "ctc_loss: workspace is null");
  if (batch == 0) return;
  DS2_CHECK(logits && input_lengths && losses, "ctc_loss: null input or output pointer");
  for (int b = 0; b < batch; ++b) {
    DS2_CHECK(input_lengths[b] >= 0 && input_lengths[b] <= max_frames,
              "ctc_loss: utterance " << b << " has input length " << input_lengths[b]
                                     << " outside [0, " << max_frames << "]");
    for (size_t i = 0; i < labels[b].size(); ++i) {
      const int c = labels[b][i];
      DS2_CHECK(c >= 1 && c < alphabet_size,
                "ctc_loss: utterance " << b << " label " << i << " is " << c << ", expected 1.."
                                       << alphabet_size - 1 << " (0 is the blank)");
    }
  }
  // Utterances are independent: the compute threads take every parts-th one (a batch's lengths
  // vary, so strides balance better than blocks), each with its own workspace.
  const int parts = std::min(batch, cpu_threads());
  if (static_cast<int>(workspace->parts.size()) < parts) workspace->parts.resize(parts);
  run_parts(parts, [&](int part) {
    for (int b = part; b < batch; b += parts)
      losses[b] = utterance_loss(logits, max_frames, batch, b, alphabet_size, input_lengths[b],
                                 labels[b], gradient, workspace->parts[part]);
  });
}

}  // namespace

int ctc_min_frames(const std::vector<int>& label) {
  int frames = static_cast<int>(label.size());
  for (size_t i = 1; i < label.size(); ++i) frames += (label[i] == label[i - 1]) ? 1 : 0;
  return frames;
}

void ctc_loss(const float* logits, int max_frames, int batch, int alphabet_size,
              const int* input_lengths, const std::vector<std::vector<int>>& labels, double* losses,
              float* gradient, CtcWorkspace* workspace) {
  ctc_loss_impl(logits, max_frames, batch, alphabet_size, input_lengths, labels, losses, gradient,
                workspace);
}

void ctc_loss(const double* logits, int max_frames, int batch, int alphabet_size,
              const int* input_lengths, const std::vector<std::vector<int>>& labels, double* losses,
              double* gradient, CtcWorkspace* workspace) {
  ctc_loss_impl(logits, max_frames, batch, alphabet_size, input_lengths, labels, losses, gradient,
                workspace);
}

void ctc_loss(const Sequences& logits, const std::vector<std::vector<int>>& labels,
              std::vector<double>* losses, Sequences* gradient, CtcWorkspace* workspace) {
  DS2_CHECK(logits.data.rank() == 3,
            "ctc_loss: logits must be {T, B, K}, got " << shape_str(logits.data.shape()));
  DS2_CHECK(losses != nullptr, "ctc_loss: losses is null");
  const int T = static_cast<int>(logits.data.dim(0));
  const int B = static_cast<int>(logits.data.dim(1));
  const int K = static_cast<int>(logits.data.dim(2));
  DS2_CHECK(static_cast<int>(logits.lengths.size()) == B,
            "ctc_loss: " << logits.lengths.size() << " lengths for a batch of " << B);
  losses->resize(B);
  float* grad = nullptr;
  if (gradient) {
    gradient->data.resize(logits.data.shape());
    gradient->lengths = logits.lengths;
    grad = gradient->data.data();
  }
  ctc_loss(logits.data.data(), T, B, K, logits.lengths.data(), labels, losses->data(), grad,
           workspace);
}

}  // namespace ds2
