// Sequence-wise batch normalization (DS2 section 3.2): statistics are taken over the valid frames
// of the whole minibatch only, so padding never shifts the mean. {T, B, F} data normalizes each
// of the F features; {T, B, C, F} data normalizes each of the C channels over all its F positions
// (as 2-D batch norm does for images).
//
// With NormStatistics::kUtterance every utterance is normalized by the statistics of its own
// valid frames instead, in training and inference alike: an utterance's output then depends on
// nothing else in the batch, and a new voice or channel is normalized away at test time as it was
// in training (on held-out FSDD speakers it took the WER with the LM from 12.95% to 9.66%; README,
// "Per-utterance normalization"). Such a layer keeps no running statistics.
//
//   BatchNorm bn("rnn0.bn", store, /*channels=*/hidden, /*momentum=*/0.1f);
//   bn.forward(x, y, /*training=*/true);   // batch statistics; running statistics updated
//   bn.backward(x, y, dy, dx);             // reads `x` and the statistics kept from forward
//   bn.forward(x, y, /*training=*/false);  // running statistics (inference)
//   BatchNorm own("conv0.bn", store, 32, 0.1f, NormStatistics::kUtterance);
//   own.forward(x, y, /*training=*/false);  // each utterance by its own frames, in either mode
//
// Parameters: "<name>.gamma" (init 1), "<name>.beta" (init 0); with batch statistics also the
// buffers "<name>.running_mean" (init 0) and "<name>.running_var" (init 1, updated with the
// unbiased batch variance as PyTorch does).
#pragma once

#include <string>
#include <vector>

#include "nn/layer.h"
#include "nn/parameters.h"

namespace ds2 {

// Whose statistics a batch norm normalizes by: the minibatch's (running averages at inference),
// or each utterance's own.
enum class NormStatistics { kBatch, kUtterance };

// "batch" or "utterance"; anything else throws naming the valid values.
NormStatistics parse_norm_statistics(const std::string& name);
std::string norm_statistics_name(NormStatistics statistics);

class BatchNorm : public Layer {
 public:
  // running = (1 - momentum) * running + momentum * batch, on every training forward.
  // With kUtterance statistics the momentum is unused.
  BatchNorm(const std::string& name, ParameterStore& store, int channels, float momentum,
            NormStatistics statistics = NormStatistics::kBatch, float epsilon = 1e-5f);

  std::string name() const override { return name_; }
  std::string describe() const override;
  Shape output_frame_shape(const Shape& input_frame_shape) const override;
  void forward(const Sequences& in, Sequences& out, bool training) override;
  // Does not read `out`, so callers may reuse its storage in between (the RNN layer does).
  // After an inference forward with batch statistics the statistics are constants and only the
  // affine part is differentiated; per-utterance statistics are differentiated in both modes.
  void backward(const Sequences& in, const Sequences& out, const Sequences& grad_out,
                Sequences& grad_in) override;

  int channels() const { return channels_; }
  float momentum() const { return momentum_; }
  float epsilon() const { return epsilon_; }
  bool per_utterance() const { return statistics_ == NormStatistics::kUtterance; }
  // Handles into the store, for the GPU twin (nn/cuda/batch_norm_cuda.h). The running
  // statistics' handles are invalid (index -1) with per-utterance statistics.
  ParamRef gamma() const { return gamma_; }
  ParamRef beta() const { return beta_; }
  ParamRef running_mean() const { return running_mean_; }
  ParamRef running_var() const { return running_var_; }

 private:
  // Frames are {channels_, inner} blocks; inner is 1 for {T, B, F} data.
  int64_t inner_size(const Sequences& in) const;
  // Sizes the per-group buffers for a batch of `batch` utterances: one group (the batch) or one
  // per utterance. Grows them only when a larger batch comes, so steady training allocates nothing.
  int64_t prepare_groups(int64_t batch);

  std::string name_;
  ParameterStore& store_;
  int channels_;
  float momentum_;
  NormStatistics statistics_;
  float epsilon_;
  ParamRef gamma_, beta_, running_mean_, running_var_;

  // Per group (the batch, or each utterance) and channel, at [group * channels_ + c].
  // From the last forward: the statistics used to normalize and whether they were the data's own.
  std::vector<float> mean_, inv_std_;
  bool used_data_stats_ = false;
  std::vector<int64_t> counts_;  // values per channel each group's statistics were taken over
  // Accumulators reused across calls (double: sums run over ~1e5 values).
  std::vector<double> sum_a_, sum_b_;
  // Affine coefficients of the elementwise pass: y = x * coef_a_ + coef_b_ (+ ...).
  std::vector<float> coef_a_, coef_b_, coef_c_;
};

}  // namespace ds2
