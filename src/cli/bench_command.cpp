#include "cli/bench_command.h"

#include <iostream>

#include "dist/world.h"
#include "train/config.h"

namespace ds2::cli {

int bench_step(const BenchStepArgs& args) {
  const Config cfg = load_config(args.config, args.overrides);
  const StepBenchResult r = ds2::bench_step(cfg, args.options);
  if (dist::World::get().rank() == 0) std::cout << format_step_bench(r) << std::flush;
  return 0;
}

int bench_loader(const BenchLoaderArgs& args) {
  const Config cfg = load_config(args.config, args.overrides);
  std::cout << format_loader_bench(ds2::bench_loader(cfg, args.options)) << std::flush;
  return 0;
}

}  // namespace ds2::cli
