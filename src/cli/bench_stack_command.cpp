#include "cli/bench_stack_command.h"

#include "cli/gpu_report.h"

#ifdef DS2_HAVE_CUDA
#include "nn/cuda/bench_stack.h"
#endif

namespace ds2::cli {

int bench_stack(const BenchStackArgs& args) {
  return run_gpu_report("ds2 bench stack", [&]() -> std::string {
#ifdef DS2_HAVE_CUDA
    StackBenchOptions o;
    o.layers = args.layers;
    o.hidden = args.hidden;
    o.batch = args.batch;
    o.steps = args.steps;
    o.chunks = args.chunks;
    o.precision = args.precision;
    o.residual = args.residual;
    o.warmup = args.warmup;
    o.repeats = args.repeats;
    return run_stack_bench(o);
#else
    (void)args;
    return "";
#endif
  });
}

}  // namespace ds2::cli
