// Kernels of the GPU Conv2d (nn/cuda/conv2d_cuda.h): implicit GEMM over the valid frames only,
// fp32 accumulation, operands fp32 (SIMT FMAs) or, with Precision::kBf16, rounded to bf16 on the
// way into shared memory and multiplied on tensor cores. No patch matrix is materialized: each CTA
// gathers the input window of its tile straight into shared memory. The CPU reference of the
// whole op is nn/conv2d.h's Conv2d (same padding, length and layout rules);
// tests/nn/cuda/conv2d_cuda_test.cpp compares the two.
//
//   kernels::Conv2dGeometry g{T, B, C, F, T_out, C_out, F_out, kt, kf, st, sf};
//   kernels::conv2d_list_frames(out_lengths, T_out, B, out_frames, stream);
//   kernels::conv2d_list_frames(in_lengths, T, B, in_frames, stream);
//   Conv2dWorkspace ws{...};              // sized by conv2d_workspace_sizes(g, out_count, true)
//   kernels::conv2d_forward(x, in_lengths, out_lengths, w, bias, out_frames, out_count, g, ws,
//                           Precision::kFp32, y, stream);
//   kernels::conv2d_backward_data(dy, out_lengths, in_lengths, w, in_frames, in_count, g, ws,
//                                 Precision::kFp32, dx, stream);
//   kernels::conv2d_backward_weights(x, in_lengths, dy, out_lengths, out_frames, out_count, g,
//                                    ws, Precision::kFp32, dw, db, stream);
//
// Layouts: x {T, B, C, F}; y and dy {T_out, B, C_out, F_out}; weight {C_out, C, kt, kf}.
// GEMM views (K = C * kt * kf, a "position" is a (valid frame, frequency) pair):
//   forward           y  {C_out, positions}      = W {C_out, K} * patches {K, positions}
//   backward-data     dx {C, input positions}    = W^T * d patches, per frequency phase f % sf
//                                                  (only the taps that reach that phase)
//   backward-weights  dW {C_out, K (+1 bias)}   += dy {C_out, positions} * patches^T, the sum
//                                                  over positions split into fixed partitions
//                                                  then added in partition order.
// With bf16, where the geometry fits (both DS2 layers; backward-data only at time stride 1), the
// passes run as windowed kernels instead (kernels/conv2d_windowed.h): each CTA stages its frames'
// input window in shared memory once.
// All kernels run on `stream` and return without waiting; none uses atomics, so results are the
// same run to run. Every index fits in 32 bits (checked on the host).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/precision.h"

namespace ds2::kernels {

struct Conv2dGeometry {
  int T, B, C, F;                              // input {T, B, C, F} (C = 1 for {T, B, F})
  int T_out, C_out, F_out;                     // output {T_out, B, C_out, F_out}
  int kernel_t, kernel_f, stride_t, stride_f;  // padding is kernel / 2 on both axes

  int64_t patch_size() const { return int64_t{C} * kernel_t * kernel_f; }
  int64_t out_frame_size() const { return int64_t{C_out} * F_out; }
};

// Valid frames (t < lengths[b]) in utterance-major order (neighbouring frames of a CTA's tile
// then share most of their input windows): frames[sum of min(lengths[u], T) for u < b, + t] =
// t * B + b. `lengths` is a device array of B ints; frames holds room for sum(lengths) ints.
void conv2d_list_frames(const int* lengths, int T, int B, int* frames, cudaStream_t stream);

// Device scratch the kernels share, sized by conv2d_workspace_sizes (grow-only in the caller).
struct Conv2dWorkspace {
  int4* positions = nullptr;   // per output position: input window origin and bounds
  int* out_offsets = nullptr;  // per output position: offset of (frame, c_out = 0, f') in y
  int4* taps = nullptr;        // per patch entry: forward taps, then the backward-data taps
  float* partials = nullptr;   // backward-weights: per partition {C_out, K + 1} sums
  uint4* fragments = nullptr;  // windowed kernels: the weight as mma fragments
};

struct Conv2dWorkspaceSizes {
  int64_t positions = 0, taps = 0, partials = 0, fragments = 0;  // element counts of each array
};

// What the three calls need for `out_count` valid output frames. `weight_grad`: room for the
// backward-weights partials (a few tens of MiB at most, whatever the batch). Every size is
// non-decreasing in out_count: sized once at the largest batch, the arrays hold every smaller one.
Conv2dWorkspaceSizes conv2d_workspace_sizes(const Conv2dGeometry& g, int out_count,
                                            bool weight_grad);

// y at every valid output frame (out_frames[0..out_count)) = W * patches + bias (`bias` may be
// null). Input positions outside [0, in_lengths[b]) x [0, F) read as zero (the padding values of
// x are never read). Padding frames of y are not touched.
void conv2d_forward(const float* x, const int* in_lengths, const int* out_lengths, const float* w,
                    const float* bias, const int* out_frames, int out_count,
                    const Conv2dGeometry& g, const Conv2dWorkspace& ws, Precision precision,
                    float* y, cudaStream_t stream);

// dx at every valid input frame (in_frames[0..in_count)) = the sum over the output positions that
// read it of W^T dy (overwritten, not accumulated). dy is read at valid output frames only
// (t' < out_lengths[b]); its padding may hold anything. Padding frames of dx are not touched.
void conv2d_backward_data(const float* dy, const int* out_lengths, const int* in_lengths,
                          const float* w, const int* in_frames, int in_count,
                          const Conv2dGeometry& g, const Conv2dWorkspace& ws, Precision precision,
                          float* dx, cudaStream_t stream);

// dw {C_out, K} += sum over valid output positions of dy x patch^T, and dbias {C_out} (may be
// null) += sum of dy, each sum split into the same fixed partitions and added in a fixed order.
void conv2d_backward_weights(const float* x, const int* in_lengths, const float* dy,
                             const int* out_lengths, const int* out_frames, int out_count,
                             const Conv2dGeometry& g, const Conv2dWorkspace& ws,
                             Precision precision, float* dw, float* dbias, cudaStream_t stream);

}  // namespace ds2::kernels
