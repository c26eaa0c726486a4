// Logistic sigmoid and tanh over float arrays, written so the compiler vectorizes them (the
// CPU GRU cell spent most of its time in libm's one-element-at-a-time tanhf and expf).
//
//   ds2::vector_sigmoid(gates, gates, 2 * H);   // in place is allowed
//   ds2::vector_tanh(pre, out, H);
//
// Accuracy: within 4e-7 relative of the float64 functions over the whole float range (tests);
// tanh keeps that relative accuracy near zero. Inputs beyond +-87 saturate; NaN stays NaN.
#pragma once

#include <cstdint>

namespace ds2 {

// y[i] = 1 / (1 + exp(-x[i])). x and y may be the same array.
void vector_sigmoid(const float* x, float* y, int64_t n);

// y[i] = tanh(x[i]). x and y may be the same array.
void vector_tanh(const float* x, float* y, int64_t n);

}  // namespace ds2
