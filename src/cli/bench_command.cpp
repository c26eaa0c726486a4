#include "cli/bench_command.h"

#include <iostream>

#include "train/config.h"

namespace ds2::cli {

int bench_step(const BenchStepArgs& args) {
  const Config cfg = load_config(args.config, args.overrides);
  std::cout << format_step_bench(ds2::bench_step(cfg, args.options)) << std::flush;
  return 0;
}

}  // namespace ds2::cli
