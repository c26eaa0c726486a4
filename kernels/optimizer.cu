#include "core/cuda/check.h"
#include "kernels/grid.h"
#include "kernels/optimizer.h"

namespace ds2::kernels {
namespace {

constexpr int kThreads = 256;
int blocks_for(int64_t n) {
  return grid_stride_blocks(n, kThreads);
}

// One parameter's update; the vector and scalar loops below share it, so a float4 lane and a
// scalar tail compute the same bits. g is scaled first (__fmul_rn: the product is rounded once,
// exactly as a separate unscale/clip pass over the gradients would have rounded it).
__device__ __forceinline__ void adam_update(float& p, float g, float& m, float& v, float lr,
                                            float b1, float b2, float eps, float decay, float c1,
                                            float c2, float grad_scale) {
  const float gi = __fmul_rn(g, grad_scale);
  // __fmul_rn/__fadd_rn keep nvcc from contracting into FMAs, so the result is the CPU's to
  // the last bit where the CPU does not contract either.
  m = __fadd_rn(__fmul_rn(b1, m), __fmul_rn(1 - b1, gi));
  v = __fadd_rn(__fmul_rn(b2, v), __fmul_rn(__fmul_rn(1 - b2, gi), gi));
  p = __fsub_rn(__fmul_rn(p, decay), __fdiv_rn(__fmul_rn(lr, __fmul_rn(m, c1)),
                                               __fadd_rn(__fsqrt_rn(__fmul_rn(v, c2)), eps)));
}

__device__ __forceinline__ void sgd_update(float& p, float g, float& vel, float lr, float mu,
                                           float wd, float grad_scale) {
  const float gi = __fadd_rn(__fmul_rn(g, grad_scale), __fmul_rn(wd, p));
  vel = __fadd_rn(__fmul_rn(mu, vel), gi);
  p = __fsub_rn(p, __fmul_rn(lr, __fadd_rn(gi, __fmul_rn(mu, vel))));
}

// The step streams 5-7 words per parameter: float4 accesses where every buffer is 16-byte aligned
// (kVec4: vec(i) over the float4 groups, then one(i) over the last n % 4 elements), one float at a
// time otherwise; grid-stride.
template <bool kVec4, class Vec, class One>
__device__ __forceinline__ void for_each_parameter(int64_t n, Vec vec, One one) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  int64_t scalar_from = 0;
  if (kVec4) {
    for (int64_t i = first; i < n / 4; i += stride) vec(i);
    scalar_from = n / 4 * 4;
  }
  for (int64_t i = scalar_from + first; i < n; i += stride) one(i);
}

template <bool kVec4>
__global__ void adam_kernel(float* p, const float* g, float* m, float* v, int64_t n, float lr,
                            float b1, float b2, float eps, float decay, float c1, float c2,
                            float grad_scale) {
  for_each_parameter<kVec4>(
      n,
      [&](int64_t i) {
        float4 pi = reinterpret_cast<float4*>(p)[i], mi = reinterpret_cast<float4*>(m)[i],
               vi = reinterpret_cast<float4*>(v)[i];
        const float4 gi = reinterpret_cast<const float4*>(g)[i];
        adam_update(pi.x, gi.x, mi.x, vi.x, lr, b1, b2, eps, decay, c1, c2, grad_scale);
        adam_update(pi.y, gi.y, mi.y, vi.y, lr, b1, b2, eps, decay, c1, c2, grad_scale);
        adam_update(pi.z, gi.z, mi.z, vi.z, lr, b1, b2, eps, decay, c1, c2, grad_scale);
        adam_update(pi.w, gi.w, mi.w, vi.w, lr, b1, b2, eps, decay, c1, c2, grad_scale);
        reinterpret_cast<float4*>(p)[i] = pi;
        reinterpret_cast<float4*>(m)[i] = mi;
        reinterpret_cast<float4*>(v)[i] = vi;
      },
      [&](int64_t i) {
        adam_update(p[i], g[i], m[i], v[i], lr, b1, b2, eps, decay, c1, c2, grad_scale);
      });
}

template <bool kVec4>
__global__ void sgd_kernel(float* p, const float* g, float* vel, int64_t n, float lr, float mu,
                           float wd, float grad_scale) {
  for_each_parameter<kVec4>(
      n,
      [&](int64_t i) {
        float4 pi = reinterpret_cast<float4*>(p)[i], vi = reinterpret_cast<float4*>(vel)[i];
        const float4 gi = reinterpret_cast<const float4*>(g)[i];
        sgd_update(pi.x, gi.x, vi.x, lr, mu, wd, grad_scale);
        sgd_update(pi.y, gi.y, vi.y, lr, mu, wd, grad_scale);
        sgd_update(pi.z, gi.z, vi.z, lr, mu, wd, grad_scale);
        sgd_update(pi.w, gi.w, vi.w, lr, mu, wd, grad_scale);
        reinterpret_cast<float4*>(p)[i] = pi;
        reinterpret_cast<float4*>(vel)[i] = vi;
      },
      [&](int64_t i) { sgd_update(p[i], g[i], vel[i], lr, mu, wd, grad_scale); });
}

__global__ void average_kernel(float* avg, const float* p, int64_t n, float a, float b) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    avg[i] = __fadd_rn(__fmul_rn(a, avg[i]), __fmul_rn(b, p[i]));
}

}  // namespace

void adam_step(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
               float beta2, float eps, float decay, float c1, float c2, float grad_scale,
               cudaStream_t stream) {
  if (n <= 0) return;
  if (aligned_to(p, 16) && aligned_to(g, 16) && aligned_to(m, 16) && aligned_to(v, 16)) {
    adam_kernel<true><<<blocks_for(ceil_div(n, 4)), kThreads, 0, stream>>>(
        p, g, m, v, n, lr, beta1, beta2, eps, decay, c1, c2, grad_scale);
  } else {
    adam_kernel<false><<<blocks_for(n), kThreads, 0, stream>>>(p, g, m, v, n, lr, beta1, beta2, eps,
                                                               decay, c1, c2, grad_scale);
  }
  DS2_CUDA_CHECK_LAUNCH();
}

void nesterov_sgd_step(float* p, const float* g, float* velocity, int64_t n, float lr, float mu,
                       float weight_decay, float grad_scale, cudaStream_t stream) {
  if (n <= 0) return;
  if (aligned_to(p, 16) && aligned_to(g, 16) && aligned_to(velocity, 16)) {
    sgd_kernel<true><<<blocks_for(ceil_div(n, 4)), kThreads, 0, stream>>>(p, g, velocity, n, lr, mu,
                                                                          weight_decay, grad_scale);
  } else {
    sgd_kernel<false><<<blocks_for(n), kThreads, 0, stream>>>(p, g, velocity, n, lr, mu,
                                                              weight_decay, grad_scale);
  }
  DS2_CUDA_CHECK_LAUNCH();
}

void average_update(float* average, const float* p, int64_t n, float a, float b,
                    cudaStream_t stream) {
  if (n <= 0) return;
  average_kernel<<<blocks_for(n), kThreads, 0, stream>>>(average, p, n, a, b);
  DS2_CUDA_CHECK_LAUNCH();
}

}  // namespace ds2::kernels
