// The GPU-only benchmark commands share how they start: print what the benchmark returns, or say
// in one line why it cannot run here (a build without CUDA, no usable GPU) and return 2.
//
//   return run_gpu_report("ds2 bench rnn", [&] { return run_rnn_bench(options); });
#pragma once

#include <functional>
#include <string>

namespace ds2::cli {

// `report` runs only in CUDA builds with a usable GPU; its text goes to stdout.
int run_gpu_report(const std::string& command, const std::function<std::string()>& report);

}  // namespace ds2::cli
