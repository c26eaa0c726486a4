#include "cli/bench_rnn_command.h"

#include "cli/gpu_report.h"

#ifdef DS2_HAVE_CUDA
#include "nn/cuda/bench_rnn.h"
#endif

namespace ds2::cli {

int bench_rnn(const BenchRnnArgs& args) {
  return run_gpu_report("ds2 bench rnn", [&]() -> std::string {
#ifdef DS2_HAVE_CUDA
    RnnBenchOptions o;
    o.hidden = args.hidden;
    o.batch = args.batch;
    o.steps = args.steps;
    o.warmup = args.warmup;
    o.repeats = args.repeats;
    o.precision = args.precision;
    o.density = args.density;
    return run_rnn_bench(o);
#else
    (void)args;
    return "";
#endif
  });
}

}  // namespace ds2::cli
