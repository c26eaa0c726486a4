// Test support for dynamic loss scaling (train.loss_scaling), shared by the CPU and GPU tests:
// an independent probe of where the scaled gradients stop overflowing, and checkpoint and
// metrics readers.
//
//   int k = ds2::testing::halvings_until_finite(cfg, 127);  // 2^127, 2^126, ... on one batch
//   ds2::testing::expect_same_tensors(run_a / "last.ckpt", run_b / "last.ckpt");
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "data/loader.h"
#include "support/checkpoint_compare.h"
#include "train/acoustic_model.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/step_engine.h"

namespace ds2::testing {

// Starting from a loss scale of 2^start_exponent and halving it, the number of halvings after
// which one backward of the first training batch (every utterance of cfg's training manifest,
// unaugmented or augmented as epoch 0 is) on the freshly initialized weights has a finite
// gradient norm; -1 when none does. This drives the engine directly, not the trainer: with the
// same batch every step and a skipped step changing no weights, it is the number of overflow
// steps the trainer must take before its first update.
inline int halvings_until_finite(const Config& cfg, int start_exponent) {
  AcousticModel am = AcousticModel::create(cfg);
  auto engine = make_step_engine(cfg, am, cfg.train.ema_decay > 0);
  const DatasetChecks checks = am.dataset_checks();
  const Dataset train = load_dataset(cfg.data.train_manifest, checks, 1);
  std::vector<int> all(train.examples.size());
  std::iota(all.begin(), all.end(), 0);
  Loader loader(train, *am.featurizer, 1, 1);
  loader.start_epoch({all}, static_cast<uint64_t>(cfg.run.seed), 0, /*augment=*/true);
  const Batch* batch = loader.next();
  std::vector<double> losses;
  for (int k = 0; k <= start_exponent; ++k) {
    engine->forward_loss(*batch, &losses);
    int finite = 0;
    for (double l : losses) finite += std::isfinite(l) ? 1 : 0;
    const double norm = engine->backward(1.0f / static_cast<float>(finite),
                                         std::ldexp(1.0f, start_exponent - k), cfg.optim.grad_clip);
    if (std::isfinite(norm)) return k;
  }
  return -1;
}

// The "train" records of RUN/metrics.jsonl.
inline std::vector<nlohmann::json> train_records(const std::filesystem::path& run) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j["event"] == "train") out.push_back(std::move(j));
  }
  return out;
}

// RUN/train.log, whole.
inline std::string train_log(const std::filesystem::path& run) {
  std::ifstream in(run / "train.log");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// How often `needle` occurs in `text`.
inline int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The checks both engines must pass (tests/train/loss_scaling_test.cpp on "cpu",
// tests/train/cuda/loss_scaling_cuda_test.cpp on "cuda"), each in a folder of `dir`:
// A run with dynamic loss scaling (growing from 2^16, never overflowing) ends with weights,
// average and optimizer state bit-identical to a run without, with clipping on some steps and
// not on others.
void expect_bit_identical_to_unscaled(const std::filesystem::path& dir, const std::string& device);
// Starting at 2^127, the run halves the scale once per overflowing step until its first update,
// as often as halvings_until_finite says, then trains; counts, log lines, metrics and the final
// scale agree with the halvings.
void expect_overflow_halvings(const std::filesystem::path& dir, const std::string& device);

}  // namespace ds2::testing
