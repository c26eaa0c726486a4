#include "cli/gpu_bench_commands.h"

#include <functional>
#include <iostream>
#include <string>

#ifdef DS2_HAVE_CUDA
#include "core/cuda/context.h"
#endif

namespace ds2::cli {
namespace {

// `report` runs only in CUDA builds with a usable GPU; its text goes to stdout.
int run_gpu_report(const std::string& command, const std::function<std::string()>& report) {
#ifdef DS2_HAVE_CUDA
  std::string why;
  if (!cuda_available(&why)) {
    std::cerr << command << ": no usable GPU: " << why << std::endl;
    return 2;
  }
  std::cout << report() << std::flush;
  return 0;
#else
  (void)report;
  std::cerr << command << ": this ds2 was built without CUDA (DS2_WITH_CUDA=OFF or no nvcc); it "
            << "needs a CUDA build and a GPU" << std::endl;
  return 2;
#endif
}

}  // namespace

#ifdef DS2_HAVE_CUDA
int bench_rnn(RnnBenchOptions options, const std::vector<int>& hidden,
              const std::vector<int>& batch) {
  // Each report printed as it is done: a long sweep shows its progress.
  for (const int h : hidden)
    for (const int b : batch) {
      options.hidden = h;
      options.batch = b;
      const int rc = run_gpu_report("ds2 bench rnn", [&] { return run_rnn_bench(options); });
      if (rc != 0) return rc;
    }
  return 0;
}
int bench_stack(const StackBenchOptions& options) {
  return run_gpu_report("ds2 bench stack", [&] { return run_stack_bench(options); });
}
#else
// The benchmarks are not compiled here: only the message.
int bench_rnn(RnnBenchOptions, const std::vector<int>&, const std::vector<int>&) {
  return run_gpu_report("ds2 bench rnn", nullptr);
}
int bench_stack(const StackBenchOptions&) {
  return run_gpu_report("ds2 bench stack", nullptr);
}
#endif

}  // namespace ds2::cli
