// CudaBatchNorm: the GPU twin of BatchNorm (nn/batch_norm.h), with the same math and parameter
// layout: sequence-wise statistics over the valid frames only ({T, B, F} per feature, {T, B, C, F}
// per channel over its F positions), running statistics updated in the device buffers with the
// unbiased batch variance, padding written as exact zeros; or, with per-utterance statistics,
// each utterance normalized by its own frames. The reductions run in a fixed order
// (kernels/batch_norm.h), so results are the same run to run.
//
//   BatchNorm cpu("rnn0.bn", store, hidden, 0.1f);  store.finalize();  store.initialize(rng);
//   DeviceParameters params(ctx, store);
//   CudaBatchNorm bn(ctx, params, cpu);
//   bn.forward(x, y, /*training=*/true);     // batch statistics; running statistics updated
//   bn.backward(x, y, dy, dx);               // reads `x` and the statistics kept from forward
#pragma once

#include <string>

#include "core/cuda/device_array.h"
#include "kernels/batch_norm.h"
#include "nn/batch_norm.h"
#include "nn/cuda/cuda_layer.h"

namespace ds2 {

class CudaBatchNorm : public CudaLayer {
 public:
  CudaBatchNorm(CudaContext& ctx, DeviceParameters& params, const BatchNorm& cpu);

  std::string name() const override { return name_; }
  void forward(const DeviceSequences& in, DeviceSequences& out, bool training) override;
  // As the CPU layer: does not read `out`; after an inference forward only the affine part is
  // differentiated.
  void backward(const DeviceSequences& in, const DeviceSequences& out,
                const DeviceSequences& grad_out, DeviceSequences& grad_in) override;

  int channels() const { return channels_; }

 private:
  int64_t inner_size(const DeviceSequences& in) const;  // F of {T, B, C, F} data, else 1
  kernels::BatchNormDims dims_of(const DeviceSequences& in) const;
  // The statistics vectors for these dimensions (grown only when a larger batch comes).
  kernels::BatchNormStats prepare_stats(const kernels::BatchNormDims& dims);

  CudaContext& ctx_;
  DeviceParameters& params_;
  std::string name_;
  int channels_;
  float momentum_, epsilon_;
  bool per_utterance_;  // NormStatistics::kUtterance: no running statistics
  ParamRef gamma_, beta_, running_mean_, running_var_;

  // From the last forward, as in the CPU layer.
  bool used_batch_stats_ = false;
  int64_t valid_count_ = 0;
  // 5 * channels floats (5 * batch * channels per utterance): mean, inv_std, and the three
  // elementwise coefficients.
  DeviceArray<float> stats_;
  DeviceArray<double> workspace_;  // per-chunk partial sums of the reductions
};

}  // namespace ds2
