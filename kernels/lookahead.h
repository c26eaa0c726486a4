// Lookahead (row) convolution kernels, the GPU side of nn/lookahead.h (same contract; the CPU
// layer is the reference). Data {T, B, F} time-major; `lengths` the B valid lengths on the
// device; W {context + 1, F}.
//
//   kernels::lookahead_forward(x, w, lengths, T, B, F, context, y, stream);
//   kernels::lookahead_backward_data(dy, w, lengths, T, B, F, context, dx, stream);
//   kernels::lookahead_backward_weights(x, dy, lengths, T, B, F, context, dw, stream);  // +=
#pragma once

#include <cuda_runtime.h>

namespace ds2::kernels {

// y[t, b, f] = sum_{j <= context, t + j < len_b} W[j, f] x[t + j, b, f]; 0 for t >= len_b.
void lookahead_forward(const float* x, const float* w, const int* lengths, int T, int B, int F,
                       int context, float* y, cudaStream_t stream);
// dx[s, b, f] = sum_{j <= context, j <= s} W[j, f] dy[s - j, b, f]; 0 for s >= len_b.
void lookahead_backward_data(const float* dy, const float* w, const int* lengths, int T, int B,
                             int F, int context, float* dx, cudaStream_t stream);
// dW[j, f] += sum over b and t with t + j < len_b of dy[t, b, f] x[t + j, b, f]; a fixed
// summation order (no atomics), so it is bit-reproducible.
void lookahead_backward_weights(const float* x, const float* dy, const int* lengths, int T, int B,
                                int F, int context, float* dw, cudaStream_t stream);

}  // namespace ds2::kernels
