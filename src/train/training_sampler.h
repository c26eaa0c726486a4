// The batch sampler of a training set as its config asks for it: durations from the validated
// examples, train.batch_size, train.sortagrad, run.seed, and with data.speaker_batches one group
// per speaker (every example must name its speaker, else an error names the manifest line).
//
//   ds2::BatchSampler sampler = ds2::training_sampler(cfg, train, world.rank(), world.size());
#pragma once

#include "data/dataset.h"
#include "data/sampler.h"
#include "train/config.h"

namespace ds2 {

BatchSampler training_sampler(const Config& cfg, const Dataset& train, int rank, int world_size);

}  // namespace ds2
