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
// Formulation: implicit GEMM over the *valid* frames only (padding frames cost nothing), no
// patch matrix in memory (kernels/conv2d.h), fp32 FMAs, or bf16 operands on tensor cores with fp32
// accumulation when the context's matmul precision is bf16: the forward and the backward-weights
// kernels gather each CTA's input window straight into shared memory, the backward-data kernel
// gathers dY the same way per frequency phase. dW and db are reduced over fixed partitions of the
// positions and added in partition order (deterministic, no atomics). Workspaces (frame lists,
// per-position and per-tap index tables, the dW partials: a few tens of MiB at most) only grow. The
// frame lists are built on the device from the lengths already there, so no host-to-device copy is
// made per call beyond DeviceSequences::set_lengths of the output.
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

 private:
  // Validates `in` (sequence shape and channel count) and returns its geometry.
  kernels::Conv2dGeometry geometry(const DeviceSequences& in) const;
  // Lists the valid frames of `seq` (T frames) into `frames` on the device; returns their count.
  int list_frames(const DeviceSequences& seq, int T, int B, DeviceArray<int>& frames);
  // Grows the workspaces for `out_count` valid output frames and returns views of them.
  kernels::Conv2dWorkspace workspace(const kernels::Conv2dGeometry& g, int out_count,
                                     bool weight_grad);

  CudaContext& ctx_;
  DeviceParameters& params_;
  std::string name_;
  int in_channels_, out_channels_, kernel_t_, kernel_f_, stride_t_, stride_f_;
  bool with_bias_;
  ParamRef weight_, bias_;

  std::vector<int> out_lengths_;  // host scratch for the forward's output lengths
  DeviceArray<int> out_frames_;   // t' * B + b of the valid output frames, utterance-major
  DeviceArray<int> in_frames_;    // t * B + b of the valid input frames (backward-data)
  DeviceArray<int4> positions_;   // per output position: input window origin and bounds
  DeviceArray<int> out_offsets_;  // per output position: its offset in y
  DeviceArray<int4> taps_;        // per patch entry: forward and backward-data taps
  DeviceArray<float> partials_;   // backward-weights partition sums
  DeviceArray<uint4> fragments_;  // bf16 windowed kernels: the weight as mma fragments
};

}  // namespace ds2
