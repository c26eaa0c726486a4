#include "core/cuda/check.h"
#include "kernels/grid.h"
#include "kernels/optimizer.h"

namespace ds2::kernels {
namespace {

constexpr int kThreads = 256;
int blocks_for(int64_t n) {
  return grid_stride_blocks(n, kThreads);
}

__global__ void adam_kernel(float* p, const float* g, float* m, float* v, int64_t n, float lr,
                            float b1, float b2, float eps, float decay, float c1, float c2) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float gi = g[i];
    // __fmul_rn/__fadd_rn keep nvcc from contracting into FMAs, so the result is the CPU's to
    // the last bit where the CPU does not contract either.
    const float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(1 - b1, gi));
    const float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(1 - b2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    p[i] = __fsub_rn(
        __fmul_rn(p[i], decay),
        __fdiv_rn(__fmul_rn(lr, __fmul_rn(mi, c1)), __fadd_rn(__fsqrt_rn(__fmul_rn(vi, c2)), eps)));
  }
}

__global__ void sgd_kernel(float* p, const float* g, float* vel, int64_t n, float lr, float mu,
                           float wd) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float gi = __fadd_rn(g[i], __fmul_rn(wd, p[i]));
    const float vi = __fadd_rn(__fmul_rn(mu, vel[i]), gi);
    vel[i] = vi;
    p[i] = __fsub_rn(p[i], __fmul_rn(lr, __fadd_rn(gi, __fmul_rn(mu, vi))));
  }
}

__global__ void average_kernel(float* avg, const float* p, int64_t n, float a, float b) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    avg[i] = __fadd_rn(__fmul_rn(a, avg[i]), __fmul_rn(b, p[i]));
}

}  // namespace

void adam_step(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
               float beta2, float eps, float decay, float c1, float c2, cudaStream_t stream) {
  if (n <= 0) return;
  adam_kernel<<<blocks_for(n), kThreads, 0, stream>>>(p, g, m, v, n, lr, beta1, beta2, eps, decay,
                                                      c1, c2);
  DS2_CUDA_CHECK_LAUNCH();
}

void nesterov_sgd_step(float* p, const float* g, float* velocity, int64_t n, float lr, float mu,
                       float weight_decay, cudaStream_t stream) {
  if (n <= 0) return;
  sgd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(p, g, velocity, n, lr, mu, weight_decay);
  DS2_CUDA_CHECK_LAUNCH();
}

void average_update(float* average, const float* p, int64_t n, float a, float b,
                    cudaStream_t stream) {
  if (n <= 0) return;
  average_kernel<<<blocks_for(n), kThreads, 0, stream>>>(average, p, n, a, b);
  DS2_CUDA_CHECK_LAUNCH();
}

}  // namespace ds2::kernels
