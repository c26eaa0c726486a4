// `ds2 bench rnn`: the recurrence of one clipped-ReLU RNN direction (h_t = relu(x_t + U h_{t-1}),
// the part that is not one big GEMM), forward and backward-data, timed side by side for
//   ours: the persistent kernel (nn/cuda/persistent_rnn.h),
//   ours: the GEMM RNN (one cuBLAS GEMM + one fused kernel per step: CudaRnnLayer's fallback),
//   cuDNN 9: cudnnRNNForward / cudnnRNNBackwardData_v8, CUDNN_RNN_RELU, unidirectional,
//            algorithms STANDARD, PERSIST_STATIC, PERSIST_DYNAMIC (only in builds with cuDNN), in
//            fp32, or with --precision bf16 in bf16 (fp16 where cuDNN refuses bf16) with fp32
//            accumulation, against our kernel with bf16 weights;
//   with --density D < 1, every row runs U pruned to D by a random mask, and ours sparse
//            persistent (nn/cuda/sparse_persistent_rnn.h) is timed first and compared with the
//            best dense option.
// Prints microseconds per timestep (median of repeated whole sequences, CUDA events), effective
// TFLOP/s (2 B H^2 per step) and the speed relative to the best cuDNN algorithm, plus a numerical
// check that the rows computed the same thing.
//
//   RnnBenchOptions o;  o.hidden = 1152;  o.batch = 4;  o.steps = 256;
//   std::cout << run_rnn_bench(o);
#pragma once

#include <string>

namespace ds2 {

struct RnnBenchOptions {
  int hidden = 1152;
  int batch = 4;
  int steps = 256;
  int warmup = 3;
  int repeats = 20;
  std::string precision = "fp32";  // fp32 | bf16: our kernel's weights, cuDNN's data type
  double density = 1.0;       // < 1: U pruned by a random mask; adds the sparse persistent kernel
  std::string cell = "relu";  // relu | gru (nn/cuda/bench_gru.h: dense only)
  bool ours_only = false;     // our persistent rows only (sweeps): no GEMM recurrence, no cuDNN
  int device = 0;
};

// Runs the benchmark on the GPU and returns the report (throws ds2::Error on bad options);
// cell "gru" runs run_gru_bench (nn/cuda/bench_gru.h) instead.
std::string run_rnn_bench(const RnnBenchOptions& options);

}  // namespace ds2
