// `ds2 bench stack --layers L --hidden H --batch B --steps T --chunk K,...`: a stack of
// unidirectional persistent RNN layers run layer after layer and as a wavefront, in one run
// (nn/cuda/bench_stack.h). Needs a CUDA build and a GPU; any other build says so and returns
// non-zero.
//
//   ds2 bench stack --layers 8 --hidden 512 --batch 4 --steps 256 --chunk 16,32,64
#pragma once

#include <string>
#include <vector>

namespace ds2::cli {

struct BenchStackArgs {
  int layers = 8;
  int hidden = 512;
  int batch = 4;
  int steps = 256;
  std::vector<int> chunks = {32};
  std::string precision = "bf16";
  bool residual = true;
  int warmup = 3;
  int repeats = 20;
};
int bench_stack(const BenchStackArgs& args);

}  // namespace ds2::cli
