#include "cli/bench_rnn_command.h"

#include <iostream>

#ifdef DS2_HAVE_CUDA
#include "core/cuda/context.h"
#include "nn/cuda/bench_rnn.h"
#endif

namespace ds2::cli {

int bench_rnn(const BenchRnnArgs& args) {
#ifdef DS2_HAVE_CUDA
  std::string why;
  if (!cuda_available(&why)) {
    std::cerr << "ds2 bench rnn: no usable GPU: " << why << std::endl;
    return 2;
  }
  RnnBenchOptions o;
  o.hidden = args.hidden;
  o.batch = args.batch;
  o.steps = args.steps;
  o.warmup = args.warmup;
  o.repeats = args.repeats;
  o.precision = args.precision;
  o.density = args.density;
  std::cout << run_rnn_bench(o) << std::flush;
  return 0;
#else
  (void)args;
  std::cerr << "ds2 bench rnn: this ds2 was built without CUDA (DS2_WITH_CUDA=OFF or no nvcc); "
               "the RNN benchmark needs a CUDA build and a GPU"
            << std::endl;
  return 2;
#endif
}

}  // namespace ds2::cli
