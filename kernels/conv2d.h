// Kernels of the GPU Conv2d (nn/cuda/conv2d_cuda.h): an im2col + cuBLAS GEMM formulation over
// the valid output frames only, processed in chunks of consecutive valid frames. The CPU
// reference of the whole op is nn/conv2d.h's Conv2d (same padding, length and layout rules);
// tests/nn/cuda/conv2d_cuda_test.cpp compares the two.
//
//   kernels::Conv2dGeometry g{T, B, C, F, T_out, C_out, F_out, kt, kf, st, sf};
//   kernels::conv2d_list_frames(out_lengths, T_out, B, frames, frame_index, stream);
//   kernels::conv2d_im2col(x, in_lengths, frames + first, count, g, col, stream);
//   gemm(...);                                   // {C_out, count * F_out} = W * col^T
//   kernels::conv2d_scatter_output(gemm_out, bias, frames + first, count, g, y, stream);
//
// Layouts: x {T, B, C, F}; y {T_out, B, C_out, F_out}; col rows (j, f') of the chunk's j-th
// frame at output frequency f', each row one patch {C, kt, kf} (the weight's layout
// {C_out, C, kt, kf} flattened per output channel). All kernels run on `stream` and return
// without waiting; none uses atomics, so results are the same run to run.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ds2::kernels {

struct Conv2dGeometry {
  int T, B, C, F;                              // input {T, B, C, F} (C = 1 for {T, B, F})
  int T_out, C_out, F_out;                     // output {T_out, B, C_out, F_out}
  int kernel_t, kernel_f, stride_t, stride_f;  // padding is kernel / 2 on both axes

  int64_t patch_size() const { return int64_t{C} * kernel_t * kernel_f; }
  int64_t out_frame_size() const { return int64_t{C_out} * F_out; }
};

// Valid output frames (t < out_lengths[b]) in the CPU's order (t-major, then b):
// frames[idx] = t * B + b, and frame_index[t * B + b] = idx, or -1 for a padding frame.
// `out_lengths` is a device array of B ints; frames holds room for sum(out_lengths) ints and
// frame_index for T_out * B.
void conv2d_list_frames(const int* out_lengths, int T_out, int B, int* frames, int* frame_index,
                        cudaStream_t stream);

// col {count * F_out, patch_size}: the input patch of output frame frames[j] at frequency f'.
// Input positions outside [0, in_lengths[b]) x [0, F) read as zero (the padding values of x
// are never read).
void conv2d_im2col(const float* x, const int* in_lengths, const int* frames, int count,
                   const Conv2dGeometry& g, float* col, cudaStream_t stream);

// y[frames[j]] (a {C_out, F_out} frame) = gemm_out[c, j * F_out + f] + bias[c], where gemm_out
// is {C_out, count * F_out} and `bias` may be null.
void conv2d_scatter_output(const float* gemm_out, const float* bias, const int* frames, int count,
                           const Conv2dGeometry& g, float* y, cudaStream_t stream);

// grad_rows {count * F_out, C_out}: row (j, f') holds dy of frame frames[j] at frequency f' for
// every output channel (the GEMM operand layout of the backward; also column_sum's for the bias).
void conv2d_gather_grad_output(const float* dy, const int* frames, int count,
                               const Conv2dGeometry& g, float* grad_rows, cudaStream_t stream);

// The adjoint of conv2d_im2col for the chunk of valid frames [first, first + count) (indices
// into conv2d_list_frames' list): every input element (t, b, c, f) with t in [t_begin, t_end)
// and t < in_lengths[b] adds the sum of the d col entries that im2col copied from it, gathered
// in a fixed order (no atomics). Padding frames of dx are not touched. d col is laid out as col.
void conv2d_col2im(const float* dcol, const int* in_lengths, const int* frame_index, int first,
                   int count, int t_begin, int t_end, const Conv2dGeometry& g, float* dx,
                   cudaStream_t stream);

}  // namespace ds2::kernels
