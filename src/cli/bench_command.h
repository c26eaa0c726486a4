// `ds2 bench step CONFIG [overrides] [--batch N --seconds S --steps N --warmup N]`.
#pragma once

#include <string>
#include <vector>

#include "train/bench.h"

namespace ds2::cli {

struct BenchStepArgs {
  std::string config;
  std::vector<std::string> overrides;
  StepBenchOptions options;
};
int bench_step(const BenchStepArgs& args);

}  // namespace ds2::cli
