// Trainer: the training loop of `ds2 train`. Validates the data (bad utterances are listed in
// RUN/data_problems.txt and counted), then for each epoch draws batches from the sampler
// (SortaGrad first), loads them on worker threads, runs forward, CTC loss, backward, gradient
// clipping and the optimizer step, logs progress, evaluates on the dev set and writes
// checkpoints (RUN/last.ckpt, RUN/best.ckpt by dev WER, RUN/step-N.ckpt, the newest kept).
// Metrics go to RUN/train.log, RUN/metrics.jsonl and TensorBoard events in RUN/tb/
// (run.tensorboard); on a terminal, stdout shows a progress line in place of the step lines.
// With train.loss_scaling=dynamic the loss gradient is scaled by a power of two that halves on
// gradient overflow (the step is skipped) and doubles after a run of clean steps.
//
//   ds2::Trainer trainer(ds2::load_config("configs/fsdd.yaml", overrides));
//   ds2::TrainSummary s = trainer.run();
#pragma once

#include <cstdint>
#include <fstream>
#include <iostream>
#include <string>

#include "dist/world.h"
#include "train/config.h"
#include "train/progress.h"

namespace ds2 {

struct TrainSummary {
  int64_t steps = 0;
  int epochs = 0;
  double first_loss = 0;     // mean loss of the first logging window
  double last_loss = 0;      // mean loss of the last logging window
  double best_dev_wer = -1;  // -1 without a dev set
  double best_dev_cer = -1;
  int64_t skipped_steps = 0;             // non-finite loss or gradient
  int64_t overflow_steps = 0;            // skipped by dynamic loss scaling, which halved the scale
  double loss_scale = 1;                 // the loss scale at the end (1 without loss scaling)
  double recurrent_density = 1;          // fraction of recurrent (.U) weights kept by pruning
  int64_t skipped_utterances = 0;        // failed to load or CTC-infeasible after augmentation
  int64_t invalid_utterances = 0;        // rejected by validation before training
  int64_t loop_device_allocations = -1;  // cudaMalloc calls inside the loop (-1: no device)
  double wall_seconds = 0;
  double audio_seconds = 0;
};

class Trainer {
 public:
  explicit Trainer(Config config);
  TrainSummary run();

 private:
  // To train.log and stdout (console: false, to train.log only).
  void log(const std::string& line, bool console = true);
  Config config_;
  bool lead_ = true;  // rank 0 (or the only rank): logs, metrics and checkpoints
  std::ofstream log_file_;
  // Terminals only, and not under mpirun (whose pseudo-terminals would interleave ranks' bars).
  ProgressLine progress_{std::cout, ProgressLine::stdout_is_terminal() && !dist::launched_by_mpi()};
};

}  // namespace ds2
