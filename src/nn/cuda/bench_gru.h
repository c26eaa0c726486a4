// `ds2 bench rnn --cell gru`: the recurrence of one GRU direction (gates r, z, n; PyTorch's and
// cuDNN's cell), forward and backward-data, timed side by side for
//   ours: the persistent GRU kernel (nn/cuda/persistent_gru.h; fp32 weights, in bf16 too, as a
//         bf16 layer runs it),
//   ours: the GEMM recurrence (one cuBLAS GEMM {B, 3H} + one fused cell kernel per step:
//         CudaRnnLayer's fallback; in bf16 on bf16 operands, nn/cuda/gemm_recurrence.h),
//   cuDNN 9: CUDNN_GRU, unidirectional, algorithms STANDARD, PERSIST_STATIC, PERSIST_DYNAMIC, fp32
//         data (CUDNN_FMA_MATH, no TF32, as ours; and default math) or in bf16 16-bit data and
//         weights (bf16, and fp16), only in builds with cuDNN.
// cuDNN runs with skip-input (W = I for every gate, or an identity input GEMM where refused), so
// ours gets the same input x in all three gates' columns and zero biases: the outputs are the same
// function, and the report checks h and dL/dx (ours: dr + dz + dn) against ours.
// Prints microseconds per timestep (median of whole sequences, CUDA events), effective TFLOP/s
// (2 B 3H^2 per step) and the speed relative to the best cuDNN algorithm at the precision (strict
// fp32, or 16-bit).
//
//   RnnBenchOptions o;  o.cell = "gru";  o.hidden = 1024;  o.batch = 4;
//   std::cout << run_gru_bench(o);
#pragma once

#include <string>

#include "nn/cuda/bench_rnn.h"

namespace ds2 {

// Throws ds2::Error for options the GRU bench does not take (--density < 1).
std::string run_gru_bench(const RnnBenchOptions& options);

}  // namespace ds2
