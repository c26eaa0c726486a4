// `ds2 bench stack`: the forward and backward passes of a stack of unidirectional clipped-ReLU
// RNN layers (nn/cuda/rnn_stack.h: projection GEMM, persistent recurrence, residual; backward:
// dx, dW, dU, db), timed in one run with
//   ours, layer after layer: each layer over all T steps before the next starts;
//   ours, wavefront:         chunks of K steps, layer l on chunk c while layer l + 1 is on c - 1
//                            (backward: from the top layer and the last chunk down);
// for each chunk size given, both replayed as CUDA graphs (and the first chunk size's forward once
// launched from the host, to show what the graph saves). Prints milliseconds per pass (median of
// repeated passes, CUDA events), microseconds per layer-step, the wavefront's speedup, and how far
// its y and dx are from the layer-after-layer ones (max |a - b| / max(1, max |a|)). Beside them,
// in builds with cuDNN, cuDNN's own L-layer RNN on the same weights (STANDARD, PERSIST_STATIC,
// PERSIST_DYNAMIC; forward, and backward-data + backward-weights), with its output checked
// against ours when the stack has no residual connections (cuDNN has none).
//
//   StackBenchOptions o;  o.layers = 8;  o.hidden = 512;  o.batch = 4;  o.chunks = {16, 32, 64};
//   std::cout << run_stack_bench(o);
#pragma once

#include <string>
#include <vector>

namespace ds2 {

struct StackBenchOptions {
  int layers = 8;
  int hidden = 512;
  int batch = 4;
  int steps = 256;
  std::vector<int> chunks = {32};
  std::string precision = "bf16";  // fp32 | bf16: the GEMMs' and the persistent kernel's
  bool residual = true;            // y = h + x around every layer (cuDNN has no such option)
  int warmup = 3;
  int repeats = 20;
};

// Runs the benchmark on the current GPU and returns the report (throws ds2::Error on bad options).
std::string run_stack_bench(const StackBenchOptions& options);

}  // namespace ds2
