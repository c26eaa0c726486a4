// CudaConv2d: the GPU twin of Conv2d (nn/conv2d.h), with its exact semantics: input {T, B, F}
// (one channel) or {T, B, C, F}, zero padding kernel/2 on both axes, frames past an utterance's
// own length read as zeros, output {output_length(T), B, C_out, output_freq(F)} with exact-zero
// padding frames, weight {C_out, C, kt, kf} and optional bias taken from the CPU layer's
// ParamRefs in the shared DeviceParameters.
//
//   Conv2d cpu("conv0", store, 1, 32, 11, 41, 2, 2);
//   store.finalize(); store.initialize(rng);
//   DeviceParameters params(ctx, store);
//   CudaConv2d conv(ctx, params, cpu);
//   conv.forward(x, y, /*training=*/true);      // DeviceSequences {T, B, 161} -> {T', B, 32, 81}
//   conv.backward(x, y, dy, dx);                // dx written, dW/db accumulated (+=)
//
// Formulation: im2col patches {C, kt, kf} of the *valid* output frames only (padding frames cost
// nothing), one cuBLAS GEMM per chunk of consecutive valid frames. Chunks bound the im2col
// workspace by a column budget (set_column_budget; default 64M floats = 256 MiB, at least one
// frame's patches), because the full batch's patches can be gigabytes (the second DS2 conv has
// 7392-long patches at each of 41 frequencies). The backward gathers dY per chunk, adds its
// column sums to dbias, accumulates dW += dY^T * col by GEMM, and for dx computes d col = dY * W
// and folds it back with a gather (each input element sums its own contributions in a fixed
// order: deterministic, no atomics). Workspaces only grow. The frame lists are built on the
// device from the lengths already there, so no host-to-device copy is made per call beyond
// DeviceSequences::set_lengths of the output.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cuda/device_array.h"
#include "kernels/conv2d.h"
#include "nn/conv2d.h"
#include "nn/cuda/cuda_layer.h"

namespace ds2 {

class CudaConv2d : public CudaLayer {
 public:
  CudaConv2d(CudaContext& ctx, DeviceParameters& params, const Conv2d& cpu);

  std::string name() const override { return name_; }
  // Same formulas as Conv2d::output_length / output_freq.
  int output_length(int input_length) const;
  int output_freq(int input_freq) const;
  void forward(const DeviceSequences& in, DeviceSequences& out, bool training) override;
  void backward(const DeviceSequences& in, const DeviceSequences& out,
                const DeviceSequences& grad_out, DeviceSequences& grad_in) override;

  // Caps the im2col workspace in floats (at least one output frame's patches are always used).
  void set_column_budget(int64_t floats) { column_budget_ = floats; }

 private:
  // Validates `in` (sequence shape and channel count) and returns its geometry.
  kernels::Conv2dGeometry geometry(const DeviceSequences& in) const;
  // Lists the valid frames of `out` (host copy for chunk planning, device copy for the kernels).
  void list_frames(const DeviceSequences& out, const kernels::Conv2dGeometry& g);
  int frames_per_chunk(const kernels::Conv2dGeometry& g) const;
  // Grows the chunk workspaces for chunks of up to `chunk` frames.
  void reserve_workspace(const kernels::Conv2dGeometry& g, int chunk);

  CudaContext& ctx_;
  DeviceParameters& params_;
  std::string name_;
  int in_channels_, out_channels_, kernel_t_, kernel_f_, stride_t_, stride_f_;
  bool with_bias_;
  ParamRef weight_, bias_;
  int64_t column_budget_;

  std::vector<int> out_lengths_;   // host scratch for the forward's output lengths
  std::vector<int> valid_frames_;  // host: t' * B + b of the valid output frames, t'-major
  DeviceArray<int> frames_;        // device: the same list
  DeviceArray<int> frame_index_;   // device: position in the list of frame t' * B + b, or -1
  DeviceArray<float> col_;         // patches of a chunk, or their gradients
  DeviceArray<float> gemm_out_;    // forward {C_out, N}; backward dY rows {N, C_out}
};

}  // namespace ds2
