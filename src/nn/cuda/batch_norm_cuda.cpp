#include "nn/cuda/batch_norm_cuda.h"

#include "core/error.h"
#include "kernels/batch_norm.h"
#include "kernels/elementwise.h"

namespace ds2 {

CudaBatchNorm::CudaBatchNorm(CudaContext& ctx, DeviceParameters& params, const BatchNorm& cpu)
    : ctx_(ctx),
      params_(params),
      name_(cpu.name()),
      channels_(cpu.channels()),
      momentum_(cpu.momentum()),
      epsilon_(cpu.epsilon()),
      per_utterance_(cpu.per_utterance()),
      gamma_(cpu.gamma()),
      beta_(cpu.beta()),
      running_mean_(cpu.running_mean()),
      running_var_(cpu.running_var()) {
  stats_.reserve(5 * int64_t{channels_});
}

int64_t CudaBatchNorm::inner_size(const DeviceSequences& in) const {
  const Shape& s = in.data.shape();
  DS2_CHECK((s.size() == 3 || s.size() == 4) && s[2] == channels_,
            name_ << ": expected {T, B, " << channels_ << "} or {T, B, " << channels_
                  << ", F} input, got " << shape_str(s));
  return s.size() == 4 ? s[3] : 1;
}

namespace {

// Five vectors of n floats: mean, inv_std and the three elementwise coefficients.
kernels::BatchNormStats stats_view(DeviceArray<float>& stats, int64_t n) {
  float* p = stats.data();
  return {p, p + n, p + 2 * n, p + 3 * n, p + 4 * n};
}

}  // namespace

kernels::BatchNormDims CudaBatchNorm::dims_of(const DeviceSequences& in) const {
  return {static_cast<int>(in.time()), static_cast<int>(in.batch()), channels_, inner_size(in),
          per_utterance_};
}

kernels::BatchNormStats CudaBatchNorm::prepare_stats(const kernels::BatchNormDims& dims) {
  const int64_t n = int64_t{channels_} * (per_utterance_ ? dims.B : 1);
  stats_.reserve(5 * n);
  return stats_view(stats_, n);
}

void CudaBatchNorm::forward(const DeviceSequences& in, DeviceSequences& out, bool training) {
  check_sequences(in, name_);
  const int C = channels_;
  const kernels::BatchNormDims dims = dims_of(in);
  cudaStream_t stream = ctx_.stream();
  out.data.resize(in.data.shape());
  out.copy_lengths(in, stream);
  const kernels::BatchNormStats stats = prepare_stats(dims);

  used_batch_stats_ = training;  // read by the batch-statistics backward only
  if (per_utterance_) {
    kernels::utterance_norm_stats(dims, in.data.data(), in.device_lengths.data(),
                                  params_.value(gamma_), params_.value(beta_), epsilon_, stats,
                                  stream);
  } else if (training) {
    int64_t frames = 0;
    for (int len : in.lengths) frames += len;
    valid_count_ = frames * dims.S;
    if (valid_count_ == 0) {  // nothing to normalize; running statistics stay untouched
      kernels::fill(out.data.data(), out.data.numel(), 0.0f, stream);
      kernels::fill(stats.mean, 2 * int64_t{C}, 0.0f, stream);  // mean and inv_std
      return;
    }
    workspace_.reserve(kernels::batch_norm_workspace(dims));
    kernels::batch_norm_train_stats(dims, in.data.data(), in.device_lengths.data(), valid_count_,
                                    params_.value(gamma_), params_.value(beta_), momentum_,
                                    epsilon_, params_.value(running_mean_),
                                    params_.value(running_var_), stats, workspace_.data(), stream);
  } else {
    kernels::batch_norm_inference_stats(C, params_.value(gamma_), params_.value(beta_),
                                        params_.value(running_mean_), params_.value(running_var_),
                                        epsilon_, stats, stream);
  }
  kernels::batch_norm_apply(dims, in.data.data(), out.data.data(), in.device_lengths.data(),
                            stats.coef_a, stats.coef_b, stream);
}

void CudaBatchNorm::backward(const DeviceSequences& in, const DeviceSequences& /*out*/,
                             const DeviceSequences& grad_out, DeviceSequences& grad_in) {
  const kernels::BatchNormDims dims = dims_of(in);
  DS2_CHECK(grad_out.data.shape() == in.data.shape(),
            name_ << ": gradient shape " << shape_str(grad_out.data.shape())
                  << " differs from the input's " << shape_str(in.data.shape()));
  cudaStream_t stream = ctx_.stream();
  const kernels::BatchNormStats stats = prepare_stats(dims);  // as forward left them
  if (per_utterance_) {
    workspace_.reserve(kernels::utterance_norm_workspace(dims));
    kernels::utterance_norm_backward_stats(dims, in.data.data(), grad_out.data.data(),
                                           in.device_lengths.data(), params_.value(gamma_),
                                           params_.grad(gamma_), params_.grad(beta_),
                                           needs_input_grad_, stats, workspace_.data(), stream);
  } else {
    workspace_.reserve(kernels::batch_norm_workspace(dims));
    kernels::batch_norm_backward_stats(
        dims, in.data.data(), grad_out.data.data(), in.device_lengths.data(), valid_count_,
        used_batch_stats_, params_.value(gamma_), params_.grad(gamma_), params_.grad(beta_),
        needs_input_grad_, stats, workspace_.data(), stream);
  }
  if (!needs_input_grad_) return;
  grad_in.data.resize(in.data.shape());
  grad_in.copy_lengths(in, stream);
  kernels::batch_norm_backward_apply(dims, in.data.data(), grad_out.data.data(),
                                     grad_in.data.data(), in.device_lengths.data(), stats, stream);
}

}  // namespace ds2
