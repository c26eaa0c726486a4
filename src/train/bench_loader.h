// `ds2 bench loader CONFIG`: how fast the data loader (read, resample, augment, featurize, pack)
// delivers the training manifest's batches with the config's loader_threads, batch size and
// augmentation, beside what the trainer asks of it (`ds2 bench step` prints the step's rate).
// The trainer stands in by holding each batch for --hold-ms (a training step's time: 0 = release
// at once), so the loader works as it does beside a real step, one batch slot taken.
//
//   ds2::LoaderBenchResult r = ds2::bench_loader(cfg, {/*batches=*/200, /*augment=*/true, 10.0});
//   std::cout << ds2::format_loader_bench(r);
#pragma once

#include <string>

#include "train/config.h"

namespace ds2 {

struct LoaderBenchOptions {
  int batches = 200;  // timed batches (fewer if the epoch is shorter)
  bool augment = true;
  double hold_ms = 0;  // how long the stand-in trainer holds each batch
};

struct LoaderBenchResult {
  std::string manifest;
  int threads = 0, slots = 0, batch_size = 0;
  bool augment = true;
  double hold_ms = 0;
  int64_t batches = 0, utterances = 0;
  double audio_seconds = 0, wall_seconds = 0;
  double audio_seconds_per_s = 0, utterances_per_s = 0;
};

LoaderBenchResult bench_loader(const Config& cfg, const LoaderBenchOptions& options);
std::string format_loader_bench(const LoaderBenchResult& r);

}  // namespace ds2
