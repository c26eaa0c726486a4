// The GPU-only benchmarks, `ds2 bench rnn` (nn/cuda/bench_rnn.h: one recurrence, ours beside the
// GEMM RNN and cuDNN) and `ds2 bench stack` (nn/cuda/bench_stack.h: a stack of unidirectional
// persistent layers, layer after layer and as a wavefront, beside cuDNN's). Each prints its
// report; in a build without CUDA, or with no usable GPU, it says so in one line and returns 2.
// The option structs are plain C++, so every build parses the same command lines.
//
//   ds2 bench rnn --hidden 2048 --batch 4 --steps 256
//   ds2 bench rnn --hidden 1152,2048 --batch 1,4,64 --ours-only   # each pair, one process
//   ds2 bench stack --layers 8 --hidden 512 --batch 4 --steps 256 --chunk 16,32,64
#pragma once

#include <vector>

#include "nn/cuda/bench_rnn.h"
#include "nn/cuda/bench_stack.h"

namespace ds2::cli {

// One report for each (hidden, batch) pair, hidden sizes outermost; `options` gives the rest.
int bench_rnn(RnnBenchOptions options, const std::vector<int>& hidden,
              const std::vector<int>& batch);
int bench_stack(const StackBenchOptions& options);

}  // namespace ds2::cli
