// CPU reference (ctc/ctc_loss.h) vs the CUDA CTC loss (kernels/ctc_loss.h through CudaCtcLoss) on
// random logits: losses, gradients, padding frames exactly zero, infeasible and empty cases.
#include "ctc/cuda/ctc_loss_cuda.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/device_array.h"
#include "core/error.h"
#include "ctc/ctc_loss.h"
#include "support/cuda_compare.h"

namespace ds2 {
namespace {

using Labels = std::vector<std::vector<int>>;

const double kInf = std::numeric_limits<double>::infinity();

// Random label of up to `length` classes in 1..K-1 that `frames` frames can still emit (repeats
// need a blank in between), so the caller decides where the infeasible cases are.
std::vector<int> random_label(int length, int K, int frames, Rng& rng) {
  std::vector<int> label;
  while (static_cast<int>(label.size()) < length) {
    label.push_back(static_cast<int>(rng.uniform_int(1, K - 1)));
    if (ctc_min_frames(label) > frames) {
      label.pop_back();
      break;
    }
  }
  return label;
}

// Logits in [-3, 3] on every frame, padding included: the loss must never read padding.
Sequences random_logits(int T, int B, int K, const std::vector<int>& lengths, Rng& rng) {
  Sequences s;
  s.data.resize({T, B, K});
  s.lengths = lengths;
  fill_uniform(s.data, rng, -3.0f, 3.0f);
  return s;
}

void expect_losses_match(const std::vector<double>& ref, const std::vector<double>& got) {
  ASSERT_EQ(ref.size(), got.size());
  for (size_t b = 0; b < ref.size(); ++b) {
    if (std::isinf(ref[b])) {
      EXPECT_EQ(got[b], kInf) << "utterance " << b;
    } else {
      // Both sides recurse in double (the GPU adds three predecessors at once, the CPU two at a
      // time; a few units in the last place apart): far tighter than float logits need.
      EXPECT_NEAR(got[b], ref[b], 1e-8 + 1e-8 * std::fabs(ref[b])) << "utterance " << b;
    }
  }
}

// Rows t >= lengths[b], and every row of an utterance with infinite loss, are exactly 0.
void expect_zero_rows(const Tensor& grad, const std::vector<int>& lengths,
                      const std::vector<double>& losses) {
  const int64_t T = grad.dim(0), B = grad.dim(1), K = grad.dim(2);
  int64_t nonzero = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b) {
      if (t < lengths[b] && !std::isinf(losses[b])) continue;
      for (int64_t k = 0; k < K; ++k) nonzero += (grad[(t * B + b) * K + k] != 0.0f) ? 1 : 0;
    }
  EXPECT_EQ(nonzero, 0) << "padding or infeasible gradient elements not exactly 0";
}

// Runs CPU and GPU on the same random logits and compares everything.
void check_against_cpu(int T, int K, const std::vector<int>& lengths, const Labels& labels,
                       uint64_t seed) {
  SCOPED_TRACE(testing::Message() << "T=" << T << " B=" << lengths.size() << " K=" << K);
  const int B = static_cast<int>(lengths.size());
  Rng rng(seed);
  const Sequences logits = random_logits(T, B, K, lengths, rng);

  CtcWorkspace workspace;
  std::vector<double> ref_losses;
  Sequences ref_grad;
  ctc_loss(logits, labels, &ref_losses, &ref_grad, &workspace);

  CudaContext ctx;
  CudaCtcLoss ctc(ctx);
  DeviceSequences d_logits, d_grad;
  upload(logits, d_logits, ctx.stream());
  d_grad.data.resize({T, B, K});
  poison(d_grad.data, ctx);
  std::vector<double> losses;
  ctc.compute(d_logits, labels, &losses, &d_grad);
  expect_losses_match(ref_losses, losses);

  Sequences got;
  download(d_grad, got, ctx.stream());
  EXPECT_EQ(got.lengths, lengths);
  expect_close(ref_grad.data, got.data, 1e-6, 1e-5, "gradient");
  expect_zero_rows(got.data, lengths, losses);

  // The device copy of the losses is the host's.
  std::vector<double> on_device(B);
  if (B > 0) {
    DS2_CUDA_CHECK(cudaMemcpy(on_device.data(), ctc.device_losses(), B * sizeof(double),
                              cudaMemcpyDeviceToHost));
  }
  EXPECT_EQ(on_device, losses);

  // Loss only: the same losses without a gradient.
  std::vector<double> loss_only;
  ctc.compute(d_logits, labels, &loss_only, nullptr);
  EXPECT_EQ(loss_only, losses);
}

TEST(CtcLossCuda, BatchOfOne) {
  DS2_REQUIRE_GPU();
  Rng rng(1);
  check_against_cpu(7, 5, {7}, {random_label(3, 5, 7, rng)}, 11);
  check_against_cpu(1, 3, {1}, {{2}}, 12);
  check_against_cpu(1, 2, {1}, {{}}, 13);
}

TEST(CtcLossCuda, OddShapesUnequalLengths) {
  DS2_REQUIRE_GPU();
  Rng rng(2);
  const int T = 37, K = 13;
  const std::vector<int> lengths = {37, 30, 1, 17, 36};
  Labels labels;
  for (int frames : lengths) {
    labels.push_back(random_label(static_cast<int>(rng.uniform_int(0, frames)), K, frames, rng));
  }
  check_against_cpu(T, K, lengths, labels, 21);
}

TEST(CtcLossCuda, Ds2SizedBatch) {
  DS2_REQUIRE_GPU();
  Rng rng(3);
  const int T = 501, K = 29;
  const std::vector<int> lengths = {501, 480, 350, 233, 499, 64, 320, 410};
  const std::vector<int> label_lengths = {150, 140, 100, 60, 9, 20, 149, 0};
  Labels labels;
  for (size_t b = 0; b < lengths.size(); ++b)
    labels.push_back(random_label(label_lengths[b], K, lengths[b], rng));
  check_against_cpu(T, K, lengths, labels, 31);
}

TEST(CtcLossCuda, LongLabels) {
  DS2_REQUIRE_GPU();
  Rng rng(4);
  // 60 labels over 150 frames, and a label longer than one pass of the recursion's threads.
  check_against_cpu(150, 29, {150}, {random_label(60, 29, 150, rng)}, 41);
  const std::vector<int> lengths = {1300, 900, 1250};
  Labels labels = {random_label(700, 29, 1300, rng), random_label(300, 29, 900, rng),
                   random_label(1100, 29, 1250, rng)};
  ASSERT_GT(labels[2].size(), 1000u);
  check_against_cpu(1300, 29, lengths, labels, 42);
}

// The recursions stage log probabilities in chunks of up to 16 KB of frames: 64 frames at K 29,
// 2 at K 700, 1 at K 3000 (every step loads its own). Chunk edges fall inside odd lengths, the
// backward recursion's first chunk is partial, and a 1-frame utterance has no step at all.
TEST(CtcLossCuda, LargeAlphabetsStageFewerFramesPerChunk) {
  DS2_REQUIRE_GPU();
  Rng rng(9);
  for (int K : {700, 3000}) {
    const std::vector<int> lengths = {131, 1, 66, 97};
    Labels labels;
    for (int frames : lengths) labels.push_back(random_label(frames / 3 + 1, K, frames, rng));
    check_against_cpu(131, K, lengths, labels, 90 + K);
  }
  // K 29: edges at frames 64 and 128 on both sides.
  check_against_cpu(129, 29, {129, 128, 65, 63},
                    {random_label(40, 29, 129, rng), random_label(40, 29, 128, rng),
                     random_label(20, 29, 65, rng), random_label(20, 29, 63, rng)},
                    99);
}

TEST(CtcLossCuda, RepeatedLabels) {
  DS2_REQUIRE_GPU();
  // {2,2,2,3,3,1,1,1,1} needs 9 + 2 + 1 + 3 = 15 frames: tight, one spare, several spare.
  const std::vector<int> repeats = {2, 2, 2, 3, 3, 1, 1, 1, 1};
  ASSERT_EQ(ctc_min_frames(repeats), 15);
  check_against_cpu(20, 4, {15, 16, 20}, {repeats, repeats, repeats}, 51);
  // One class only (K = 2): every label equal, the blank between each pair forced.
  check_against_cpu(12, 2, {11, 12, 9}, {{1, 1, 1, 1, 1, 1}, {1, 1, 1}, {1}}, 52);
  // A class that appears many times at once and also far apart in one label.
  check_against_cpu(40, 6, {40}, {{5, 1, 5, 2, 5, 5, 3, 5, 4, 5, 5, 5, 1, 1}}, 53);
}

TEST(CtcLossCuda, EmptyLabels) {
  DS2_REQUIRE_GPU();
  check_against_cpu(9, 7, {9, 4, 9}, {{}, {}, {3, 6}}, 61);
}

TEST(CtcLossCuda, InfeasibleUtterancesLeaveNeighboursAlone) {
  DS2_REQUIRE_GPU();
  // Too few frames for the label count, enough for the count but not for the repeats, feasible
  // neighbours on both sides.
  const Labels labels = {{1, 2, 3}, {1, 2, 3, 4, 5, 6}, {2, 2, 2, 2}, {4, 1}, {3}};
  const std::vector<int> lengths = {10, 5, 6, 10, 2};
  ASSERT_GT(ctc_min_frames(labels[2]), lengths[2]);
  ASSERT_LE(static_cast<int>(labels[2].size()), lengths[2]);
  check_against_cpu(10, 7, lengths, labels, 71);
  CtcWorkspace ws;
  std::vector<double> ref;
  Rng rng(71);
  ctc_loss(random_logits(10, 5, 7, lengths, rng), labels, &ref, nullptr, &ws);
  EXPECT_EQ(ref[1], kInf);
  EXPECT_EQ(ref[2], kInf);
  EXPECT_TRUE(std::isfinite(ref[0]) && std::isfinite(ref[3]) && std::isfinite(ref[4]));
}

TEST(CtcLossCuda, ZeroLengthUtterances) {
  DS2_REQUIRE_GPU();
  // Zero frames emit exactly the empty label (loss 0); anything else is infeasible.
  check_against_cpu(6, 5, {0, 6, 0}, {{}, {1, 4}, {2}}, 81);

  // No frames at all in the batch (the CPU reference wants a logits pointer, so known values).
  CudaContext ctx;
  CudaCtcLoss ctc(ctx);
  DeviceSequences d_logits, d_grad;
  d_logits.data.resize({0, 2, 5});
  d_logits.set_lengths({0, 0}, ctx.stream());
  std::vector<double> losses;
  ctc.compute(d_logits, Labels{{}, {3}}, &losses, &d_grad);
  EXPECT_EQ(losses, (std::vector<double>{0.0, kInf}));
  EXPECT_EQ(d_grad.data.shape(), (Shape{0, 2, 5}));
  EXPECT_EQ(d_grad.lengths, (std::vector<int>{0, 0}));
}

TEST(CtcLossCuda, DeterministicAndAllocationFreeOnceSized) {
  DS2_REQUIRE_GPU();
  Rng rng(9);
  const int T = 120, K = 29;
  const std::vector<int> lengths = {120, 97, 64};
  Labels labels;
  for (int frames : lengths) labels.push_back(random_label(frames / 3, K, frames, rng));
  const Sequences logits = random_logits(T, 3, K, lengths, rng);

  CudaContext ctx;
  CudaCtcLoss ctc(ctx);
  DeviceSequences d_logits, d_grad;
  upload(logits, d_logits, ctx.stream());
  std::vector<double> first_losses, second_losses;
  ctc.compute(d_logits, labels, &first_losses, &d_grad);
  const Tensor first = download_tensor(d_grad.data, ctx);

  const int64_t allocations = device_allocations();
  poison(d_grad.data, ctx);
  ctc.compute(d_logits, labels, &second_losses, &d_grad);
  const Tensor second = download_tensor(d_grad.data, ctx);
  EXPECT_EQ(device_allocations(), allocations);
  EXPECT_EQ(first_losses, second_losses);
  ASSERT_EQ(first.numel(), second.numel());
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.numel() * sizeof(float)), 0)
      << "gradient differs between identical runs";

  // A smaller batch with shorter labels reuses every buffer.
  const Sequences small = random_logits(50, 2, K, {50, 31}, rng);
  DeviceSequences d_small;
  upload(small, d_small, ctx.stream());
  const int64_t before_small = device_allocations();
  ctc.compute(d_small, Labels{{1, 2, 3}, {}}, &second_losses, &d_grad);
  EXPECT_EQ(device_allocations(), before_small);
  EXPECT_EQ(second_losses.size(), 2u);
}

TEST(CtcLossCuda, GradientMayOverwriteTheLogits) {
  DS2_REQUIRE_GPU();
  Rng rng(10);
  const int T = 33, K = 11;
  const std::vector<int> lengths = {33, 20};
  const Labels labels = {random_label(12, K, 33, rng), random_label(7, K, 20, rng)};
  const Sequences logits = random_logits(T, 2, K, lengths, rng);
  CtcWorkspace ws;
  std::vector<double> ref_losses, losses;
  Sequences ref_grad;
  ctc_loss(logits, labels, &ref_losses, &ref_grad, &ws);

  CudaContext ctx;
  CudaCtcLoss ctc(ctx);
  DeviceSequences d;
  upload(logits, d, ctx.stream());
  ctc.compute(d, labels, &losses, &d);
  expect_losses_match(ref_losses, losses);
  expect_close(ref_grad.data, download_tensor(d.data, ctx), 1e-6, 1e-5, "in-place gradient");
}

TEST(CtcLossCuda, RejectsBadLabelsAndShapes) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  CudaCtcLoss ctc(ctx);
  Rng rng(11);
  DeviceSequences d;
  upload(random_logits(4, 2, 5, {4, 3}, rng), d, ctx.stream());
  std::vector<double> losses;
  EXPECT_THROW(ctc.compute(d, Labels{{1}, {0}}, &losses, nullptr), Error);  // the blank as a label
  EXPECT_THROW(ctc.compute(d, Labels{{1}, {5}}, &losses, nullptr), Error);  // past the alphabet
  EXPECT_THROW(ctc.compute(d, Labels{{1}}, &losses, nullptr), Error);       // one label too few
}

}  // namespace
}  // namespace ds2
