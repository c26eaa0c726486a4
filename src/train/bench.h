// `ds2 bench step`: the speed of one training step for a config's model on this machine's
// engine (GPU when present), on synthetic utterances of a fixed length: no data loading, so the
// number is the step itself. Prints ms per step, utterances/s, audio-seconds/s, peak device
// memory and where the time goes per layer kind. Under mpirun the batch is the global one, split
// evenly over the ranks, and every step includes the gradient allreduce; the result then also
// gives the time per step spent waiting on communication that backward did not hide. With
// `prune.density=D prune.end_step=1` the recurrent matrices are pruned to D first (magnitude, at
// the initial weights), so pruned layers run as in training (sparse persistent where chosen).
//
//   ds2::StepBenchOptions o;  o.batch = 4;  o.seconds = 10;
//   ds2::StepBenchResult r = ds2::bench_step(load_config("configs/ds2-large.yaml", {}), o);
//   std::cout << format_step_bench(r);
#pragma once

#include <map>
#include <string>

#include "train/config.h"
#include "train/step_engine.h"

namespace ds2 {

struct StepBenchOptions {
  int batch = 0;        // 0 = the config's train.batch_size
  double seconds = 10;  // audio per utterance
  int warmup = 3;       // untimed steps first
  int steps = 10;       // timed steps
  int label_rate = 15;  // label characters per audio second (English read speech: ~15)
};

struct StepBenchResult {
  std::string engine;      // StepEngine::describe()
  std::string model;       // one line: parameters and layers
  std::string layers;      // StepEngine::describe_layers(): how the recurrent layers run
  std::string model_note;  // with prune.density < 1: the pruning applied before timing
  int batch = 0;           // global: over all ranks
  int ranks = 1;
  double seconds = 0;
  int frames = 0, output_frames = 0, label_length = 0;
  double ms_per_step = 0;
  double utterances_per_s = 0;
  double audio_seconds_per_s = 0;
  int64_t peak_device_bytes = -1;
  double exposed_comm_ms = 0;  // per step, rank 0's wait on communication not hidden by backward
  std::map<std::string, double> part_ms;  // per step
  std::vector<LayerCost> layer_costs;     // per step, in layer order
};

StepBenchResult bench_step(const Config& cfg, const StepBenchOptions& options);
std::string format_step_bench(const StepBenchResult& r);

}  // namespace ds2
