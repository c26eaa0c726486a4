// CTC loss (Graves et al., 2006) on the CPU: the reference for the CUDA kernel and the loss of
// the CPU backend. Works in double precision, in probability space with each frame's forward and
// backward variables rescaled to sum to 1 (no exp or log per lattice cell), and in log space for
// an utterance where mass that may matter underflows there (logits hundreds apart); it folds the
// softmax into the gradient the way warp-ctc does, so the model's last layer emits raw activations.
//
//   ds2::CtcWorkspace workspace;             // caller-owned; reuse it: no allocation once sized
//   std::vector<double> losses(batch);
//   ds2::ctc_loss(logits, T, batch, K, input_lengths, labels, losses.data(),
//                 grad /* or nullptr */, &workspace);
//
//   // or, with the model's time-major output:
//   ds2::ctc_loss(model_out /* Sequences {T, B, K} */, labels, &losses, &grad_seq, &workspace);
//
// Conventions: class 0 is the blank, labels use 1..K-1, logits are time-major [T, B, K] (frame t
// of utterance b at (t*B + b)*K). loss[b] = -log p(labels[b] | x_b) over the first
// input_lengths[b] frames. The gradient is d loss[b] / d logits (softmax minus the posterior
// occupancy of each class) on valid frames and exactly 0 on padding frames. An utterance whose
// label cannot be aligned (too few frames) gets loss +infinity and an all-zero gradient, so one
// bad utterance never puts NaN into a batch's update.
#pragma once

#include <vector>

#include "nn/sequences.h"

namespace ds2 {

// Scratch memory for one utterance at a time.
struct CtcUtteranceWorkspace {
  std::vector<double> log_probs;  // [frames, K] log-softmax of one utterance
  std::vector<double> probs;      // [frames, K] its softmax
  std::vector<double> alpha;      // [frames, 2U+1] forward probabilities (scaled, or logs)
  std::vector<double> beta;       // [frames, 2U+1] backward probabilities (scaled, or logs)
  std::vector<double> occupancy;  // [K] posterior occupancy of each class at one frame
  std::vector<int> extended;      // [2U+1] label with blanks interleaved
  std::vector<double> skip;       // [2U+1] 1 where position s may be reached from s - 2
  std::vector<double> emission;   // [2U+1] one frame's scratch
  std::vector<double> flushed;    // [frames] bounds of the mass the scaled recursions flushed
};

// Scratch memory for ctc_loss: one utterance workspace per compute thread the batch is split
// over (core/cpu_threads.h). Buffers only grow: after the largest batch and utterance have been
// seen, ctc_loss allocates nothing. One call at a time.
struct CtcWorkspace {
  std::vector<CtcUtteranceWorkspace> parts;
};

// Fewest frames that can emit `label`: one per label, plus one blank between each pair of equal
// adjacent labels (CTC would otherwise merge them).
int ctc_min_frames(const std::vector<int>& label);

// Computes per-utterance losses and, when `gradient` is not null, d loss / d logits.
//   logits         [max_frames, batch, alphabet_size], unnormalized activations
//   input_lengths  [batch], each in [0, max_frames]
//   labels         batch label sequences with values in [1, alphabet_size-1]; may be empty
//   losses         [batch] output
//   gradient       [max_frames, batch, alphabet_size] output (overwritten), or nullptr
// The arithmetic is double for both precisions; the float overload serves the model, the double
// one finite-difference checks. Throws ds2::Error on inconsistent arguments (naming the
// utterance), never on an infeasible alignment.
void ctc_loss(const float* logits, int max_frames, int batch, int alphabet_size,
              const int* input_lengths, const std::vector<std::vector<int>>& labels, double* losses,
              float* gradient, CtcWorkspace* workspace);
void ctc_loss(const double* logits, int max_frames, int batch, int alphabet_size,
              const int* input_lengths, const std::vector<std::vector<int>>& labels, double* losses,
              double* gradient, CtcWorkspace* workspace);

// Same on Sequences with data {T, B, K} and lengths as input lengths. `losses` is resized to B;
// `gradient`, when not null, gets data resized to {T, B, K} and the same lengths.
void ctc_loss(const Sequences& logits, const std::vector<std::vector<int>>& labels,
              std::vector<double>* losses, Sequences* gradient, CtcWorkspace* workspace);

}  // namespace ds2
