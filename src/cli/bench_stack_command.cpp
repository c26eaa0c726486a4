#include "cli/bench_stack_command.h"

#include <iostream>

#ifdef DS2_HAVE_CUDA
#include "core/cuda/context.h"
#include "nn/cuda/bench_stack.h"
#endif

namespace ds2::cli {

int bench_stack(const BenchStackArgs& args) {
#ifdef DS2_HAVE_CUDA
  std::string why;
  if (!cuda_available(&why)) {
    std::cerr << "ds2 bench stack: no usable GPU: " << why << std::endl;
    return 2;
  }
  StackBenchOptions o;
  o.layers = args.layers;
  o.hidden = args.hidden;
  o.batch = args.batch;
  o.steps = args.steps;
  o.chunks = args.chunks;
  o.precision = args.precision;
  o.warmup = args.warmup;
  o.repeats = args.repeats;
  std::cout << run_stack_bench(o) << std::flush;
  return 0;
#else
  (void)args;
  std::cerr << "ds2 bench stack: this ds2 was built without CUDA (DS2_WITH_CUDA=OFF or no nvcc); "
               "the stack benchmark needs a CUDA build and a GPU"
            << std::endl;
  return 2;
#endif
}

}  // namespace ds2::cli
