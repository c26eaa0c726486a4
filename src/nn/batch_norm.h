// Sequence-wise batch normalization (DS2 section 3.2): statistics are taken over the valid frames
// of the whole minibatch only, so padding never shifts the mean. {T, B, F} data normalizes each
// of the F features; {T, B, C, F} data normalizes each of the C channels over all its F positions
// (as 2-D batch norm does for images).
//
//   BatchNorm bn("rnn0.bn", store, /*channels=*/hidden, /*momentum=*/0.1f);
//   bn.forward(x, y, /*training=*/true);   // batch statistics; running statistics updated
//   bn.backward(x, y, dy, dx);             // reads `x` and the statistics kept from forward
//   bn.forward(x, y, /*training=*/false);  // running statistics (inference)
//
// Parameters: "<name>.gamma" (init 1), "<name>.beta" (init 0); buffers "<name>.running_mean"
// (init 0) and "<name>.running_var" (init 1, updated with the unbiased batch variance as PyTorch
// does).
#pragma once

#include <string>
#include <vector>

#include "nn/layer.h"
#include "nn/parameters.h"

namespace ds2 {

class BatchNorm : public Layer {
 public:
  // running = (1 - momentum) * running + momentum * batch, on every training forward.
  BatchNorm(const std::string& name, ParameterStore& store, int channels, float momentum,
            float epsilon = 1e-5f);

  std::string name() const override { return name_; }
  std::string describe() const override;
  Shape output_frame_shape(const Shape& input_frame_shape) const override;
  void forward(const Sequences& in, Sequences& out, bool training) override;
  // Does not read `out`, so callers may reuse its storage in between (the RNN layer does).
  // After an inference forward the statistics are constants and only the affine part is
  // differentiated.
  void backward(const Sequences& in, const Sequences& out, const Sequences& grad_out,
                Sequences& grad_in) override;

  int channels() const { return channels_; }
  float momentum() const { return momentum_; }
  float epsilon() const { return epsilon_; }
  // Handles into the store, for the GPU twin (nn/cuda/batch_norm_cuda.h).
  ParamRef gamma() const { return gamma_; }
  ParamRef beta() const { return beta_; }
  ParamRef running_mean() const { return running_mean_; }
  ParamRef running_var() const { return running_var_; }

 private:
  // Frames are {channels_, inner} blocks; inner is 1 for {T, B, F} data.
  int64_t inner_size(const Sequences& in) const;

  std::string name_;
  ParameterStore& store_;
  int channels_;
  float momentum_, epsilon_;
  ParamRef gamma_, beta_, running_mean_, running_var_;

  // From the last forward: the statistics used to normalize and whether they were the batch's.
  std::vector<float> mean_, inv_std_;
  bool used_batch_stats_ = false;
  int64_t valid_count_ = 0;  // values per channel the batch statistics were taken over
  // Per-channel accumulators reused across calls (double: sums run over ~1e5 values).
  std::vector<double> sum_a_, sum_b_;
  // Per-channel affine coefficients of the elementwise pass: y = x * coef_a_ + coef_b_ (+ ...).
  std::vector<float> coef_a_, coef_b_, coef_c_;
};

}  // namespace ds2
