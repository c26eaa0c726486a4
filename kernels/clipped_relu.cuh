// The clipped-ReLU cell shared by the RNN kernels (GEMM step kernels and the persistent ones):
// h = min(max(v, 0), clip), and its gradient, which passes g only where 0 < h < clip.
//
//   h = clipped_relu(pre + recurrent, clip);
//   dpre = clipped_relu_grad(h, dy + carry, clip);
#pragma once

namespace ds2::kernels {

__device__ __forceinline__ float clipped_relu(float v, float clip) {
  return fminf(fmaxf(v, 0.0f), clip);
}

__device__ __forceinline__ float clipped_relu_grad(float h, float g, float clip) {
  return (h > 0.0f && h < clip) ? g : 0.0f;
}

}  // namespace ds2::kernels
