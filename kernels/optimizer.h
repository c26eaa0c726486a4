// Optimizer updates over the flat parameter buffer, with exactly the float arithmetic of the CPU
// optimizers in src/train/optimizer.cpp (their reference), and the weight average (EMA).
//
//   ds2::kernels::adam_step(p, g, m, v, n, lr, b1, b2, eps, decay, c1, c2, grad_scale, stream);
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ds2::kernels {

// Both steps read the gradient as g * grad_scale (the loss-scale and clipping factor, rounded
// once as a separate scaling pass would), so the gradients need no pass of their own.
//
// m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p = p*decay - lr * (m c1) / (sqrt(v c2) + eps)
// with c1, c2 the bias corrections and decay = 1 - lr * weight_decay (decoupled, AdamW).
void adam_step(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
               float beta2, float eps, float decay, float c1, float c2, float grad_scale,
               cudaStream_t stream);

// g' = g + wd p;  vel = mu vel + g';  p -= lr (g' + mu vel)   (PyTorch's Nesterov SGD).
void nesterov_sgd_step(float* p, const float* g, float* velocity, int64_t n, float lr, float mu,
                       float weight_decay, float grad_scale, cudaStream_t stream);

// average = a * average + b * p.
void average_update(float* average, const float* p, int64_t n, float a, float b,
                    cudaStream_t stream);

}  // namespace ds2::kernels
