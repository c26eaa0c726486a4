// Unsupervised adaptation of the batch-norm statistics to new audio (AdaBN, Li et al. 2016):
// the network runs over the recordings in training mode, so every batch-norm layer folds the
// statistics of that audio into its running mean and variance (with its own momentum), and
// nothing else changes: no transcripts are read, no weight moves. A model trained on a few
// speakers then normalizes a new speaker's (or channel's) activations by that speaker's own
// statistics. Dropout runs as in training, so the statistics are gathered as training gathered
// them. Runs on the host model; install a GPU inference engine afterwards. A model trained with
// per-utterance statistics (model.batch_norm_statistics: utterance) already normalizes every
// recording by its own frames and keeps no running statistics: there is nothing to adapt.
//
//   ds2::AcousticModel am = ds2::AcousticModel::load("runs/fsdd/best.ckpt");
//   ds2::adapt_batch_norm(am, new_speaker_set, /*passes=*/2, /*batch_size=*/16, /*threads=*/2);
//   ds2::EvalResult r = ds2::evaluate(am, new_speaker_set, 16, 2);
#pragma once

#include "data/dataset.h"
#include "train/acoustic_model.h"

namespace ds2 {

// False for a model with per-utterance batch-norm statistics.
bool has_running_statistics(const AcousticModel& am);

// `passes` shuffled passes over `dataset` (order from the config's run.seed, so the result is
// reproducible); utterances that cannot be loaded are skipped. passes 0 does nothing; passes > 0
// on a model without running statistics throws, saying why.
void adapt_batch_norm(AcousticModel& am, const Dataset& dataset, int passes, int batch_size,
                      int threads);

}  // namespace ds2
