// `ds2 bench step CONFIG [overrides] [--batch N --seconds S --steps N --warmup N]` and
// `ds2 bench loader CONFIG [overrides] [--batches N] [--no-augment]`.
#pragma once

#include <string>
#include <vector>

#include "train/bench.h"
#include "train/bench_loader.h"

namespace ds2::cli {

struct BenchStepArgs {
  std::string config;
  std::vector<std::string> overrides;
  StepBenchOptions options;
};
int bench_step(const BenchStepArgs& args);

struct BenchLoaderArgs {
  std::string config;
  std::vector<std::string> overrides;
  LoaderBenchOptions options;
};
int bench_loader(const BenchLoaderArgs& args);

}  // namespace ds2::cli
