// `ds2 bench rnn --hidden H --batch B --steps T [--precision fp32|bf16] [--density D]`: the
// persistent RNN kernel beside our GEMM RNN and cuDNN's RNN (nn/cuda/bench_rnn.h); with D < 1 on
// a pruned U, with the sparse persistent kernel first. Needs a CUDA build and a GPU; any
// other build says so and returns non-zero.
//
//   ds2 bench rnn --hidden 2048 --batch 4 --steps 256
//   ds2 bench rnn --hidden 2304 --batch 4 --density 0.1
#pragma once

#include <string>

namespace ds2::cli {

struct BenchRnnArgs {
  int hidden = 1152;
  int batch = 4;
  int steps = 256;
  int warmup = 3;
  int repeats = 20;
  std::string precision = "fp32";
  double density = 1.0;
};
int bench_rnn(const BenchRnnArgs& args);

}  // namespace ds2::cli
