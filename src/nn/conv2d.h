// 2-D convolution over (time, frequency) for the DS2 front-end, on {T, B, C, F} sequences
// ({T, B, F} is accepted as one input channel). Zero padding is kernel/2 on both axes, and frames
// past an utterance's own length count as zeros, so an utterance convolves the same in any batch.
//
//   Conv2d conv("conv0", store, /*in_channels=*/1, /*out_channels=*/32, /*kernel_t=*/11,
//               /*kernel_f=*/41, /*stride_t=*/2, /*stride_f=*/2);
//   conv.forward(x, y, true);      // x {T, B, 81} -> y {T', B, 32, 41}
//   conv.output_length(200);       // 100 = (200 + 2*5 - 11) / 2 + 1
//
// Parameters: "<name>.weight" {out, in, kernel_t, kernel_f} and, unless disabled, "<name>.bias"
// {out}, both U(-1/sqrt(fan_in), 1/sqrt(fan_in)). Padding output frames cost nothing. Two GEMM
// formulations, picked per layer (see ConvAlgorithm):
//   patches:   full im2col patches {C, kt, kf} of chunks of valid output frames, one GEMM a chunk.
//   time taps: per utterance, frequency-only patches {C, kf} of each input frame, then one GEMM
//              per kernel row (time tap) accumulating into the output; kt times less patch data
//              to write and read, which dominates when C * kf is large (the second DS2 conv).
#pragma once

#include <string>
#include <vector>

#include "nn/layer.h"
#include "nn/parameters.h"

namespace ds2 {

enum class ConvAlgorithm {
  kAuto,  // time taps when in_channels * kernel_f >= 128 (a tap GEMM's depth), else patches
  kPatches,
  kTimeTaps,
};

class Conv2d : public Layer {
 public:
  // `with_bias` = false drops the bias, which a following batch norm makes redundant.
  Conv2d(const std::string& name, ParameterStore& store, int in_channels, int out_channels,
         int kernel_t, int kernel_f, int stride_t, int stride_f, bool with_bias = true);

  std::string name() const override { return name_; }
  std::string describe() const override;
  // {F} (one input channel) or {C, F} -> {out_channels, output_freq(F)}.
  Shape output_frame_shape(const Shape& input_frame_shape) const override;
  // (L + 2*(kernel_t/2) - kernel_t) / stride_t + 1, and 0 for an empty input.
  int output_length(int input_length) const override;
  int output_freq(int input_freq) const;
  void forward(const Sequences& in, Sequences& out, bool training) override;
  void backward(const Sequences& in, const Sequences& out, const Sequences& grad_out,
                Sequences& grad_in) override;

  void set_algorithm(ConvAlgorithm algorithm) { algorithm_ = algorithm; }
  // The formulation forward/backward use (kAuto resolved).
  ConvAlgorithm algorithm() const;
  // Caps the patches algorithm's im2col workspace (in floats; at least one frame's patches are
  // always used). Smaller saves memory, larger makes fewer, bigger GEMMs. Default 4M (16 MiB).
  void set_column_budget(int64_t floats) { column_budget_ = floats; }

  // Configuration and parameter handles, read by the GPU twin (nn/cuda/conv2d_cuda.h).
  int in_channels() const { return in_channels_; }
  int out_channels() const { return out_channels_; }
  int kernel_t() const { return kernel_t_; }
  int kernel_f() const { return kernel_f_; }
  int stride_t() const { return stride_t_; }
  int stride_f() const { return stride_f_; }
  bool with_bias() const { return with_bias_; }
  ParamRef weight() const { return weight_; }
  ParamRef bias() const { return bias_; }  // index -1 without a bias

 private:
  // Validates `in` and returns its frequency count.
  int input_freq(const Sequences& in) const;
  int patch_size() const { return in_channels_ * kernel_t_ * kernel_f_; }

  // Patches algorithm (conv2d.cpp).
  void list_valid_frames(const Sequences& out);
  int frames_per_chunk(int out_freq) const;
  // Fills col_ rows [frame j of the chunk][f'] with the input patch of each frame, {C, kt, kf}.
  void im2col(const Sequences& in, int in_freq, int out_freq, const int* frames, int count);
  // Adds col_ (holding d patch) back onto grad_in; the inverse scatter of im2col.
  void col2im(Sequences& grad_in, int in_freq, int out_freq, const int* frames, int count) const;
  void forward_patches(const Sequences& in, Sequences& out, int in_freq);
  void backward_patches(const Sequences& in, const Sequences& out, const Sequences& grad_out,
                        Sequences& grad_in, int in_freq);

  // Time-taps algorithm (conv2d_time_taps.cpp).
  // col_ = frequency-only patches {C, kf} of utterance b, rows (input frame, f') with input
  // frames grouped by phase t % stride_t so that every tap reads a contiguous row range.
  void frequency_patches(const Sequences& in, int b, int in_freq, int out_freq, int phase_frames);
  void repack_weight_by_tap();
  void forward_time_taps(const Sequences& in, Sequences& out, int in_freq);
  void backward_time_taps(const Sequences& in, const Sequences& out, const Sequences& grad_out,
                          Sequences& grad_in, int in_freq);

  std::string name_;
  ParameterStore& store_;
  int in_channels_, out_channels_, kernel_t_, kernel_f_, stride_t_, stride_f_;
  bool with_bias_;
  ConvAlgorithm algorithm_ = ConvAlgorithm::kAuto;
  int64_t column_budget_;
  ParamRef weight_, bias_;

  std::vector<int> valid_frames_;  // patches: flattened (t' * B + b) of valid output frames
  Tensor col_;                     // patches of a chunk or utterance (or their gradients)
  Tensor gemm_out_;                // {out_channels, rows}: output (gradient) of a chunk/utterance
  Tensor weight_by_tap_;           // taps: {kt, out, C * kf}, weight reordered per time tap
  Tensor grad_weight_by_tap_;      // taps: the same layout, accumulated over a backward
  Tensor grad_out_by_tap_;         // taps: {L * F', kt * out}: d output seen by each input row
  Tensor grad_out_rows_;           // taps: {L' * F', out}: one utterance's d output, transposed
  Tensor grad_col_;                // taps: {L * F', C * kf}: d frequency patches
};

}  // namespace ds2
