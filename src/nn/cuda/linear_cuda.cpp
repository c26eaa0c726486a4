#include "nn/cuda/linear_cuda.h"

#include "core/cuda/check.h"
#include "core/cuda/gemm.h"
#include "kernels/elementwise.h"

namespace ds2 {

CudaLinear::CudaLinear(CudaContext& ctx, DeviceParameters& params, const Linear& reference)
    : ctx_(ctx),
      params_(params),
      name_(reference.name()),
      in_features_(reference.in_features()),
      out_features_(reference.out_features()),
      weight_(reference.weight()),
      bias_(reference.bias()) {
  set_needs_input_grad(reference.needs_input_grad());
}

void CudaLinear::forward(const DeviceSequences& in, DeviceSequences& out, bool /*training*/) {
  check_sequences(in, name_);
  DS2_CHECK(in.frame_size() == in_features_ || in.data.numel() == 0,
            name_ << ": input " << shape_str(in.data.shape()) << " is not " << in_features_
                  << " features per frame");
  const int T = static_cast<int>(in.time()), B = static_cast<int>(in.batch());
  const int K = out_features_, rows = T * B;
  out.data.resize({T, B, K});
  out.copy_lengths(in, ctx_.stream());
  gemm(ctx_, false, true, rows, K, in_features_, 1.0f, in.data.data(), in_features_,
       params_.value(weight_), in_features_, 0.0f, out.data.data(), K);
  kernels::add_row_bias(out.data.data(), params_.value(bias_), rows, K, ctx_.stream());
  zero_padding(out, ctx_.stream());
}

void CudaLinear::backward(const DeviceSequences& in, const DeviceSequences& out,
                          const DeviceSequences& grad_out, DeviceSequences& grad_in) {
  DS2_CHECK(grad_out.data.shape() == out.data.shape(),
            name_ << ": gradient shape " << shape_str(grad_out.data.shape())
                  << " differs from the output's " << shape_str(out.data.shape()));
  const int T = static_cast<int>(in.time()), B = static_cast<int>(in.batch());
  const int K = out_features_, rows = T * B;
  masked_grad_.resize({rows, K});
  DS2_CUDA_CHECK(cudaMemcpyAsync(masked_grad_.data(), grad_out.data.data(),
                                 sizeof(float) * static_cast<size_t>(rows) * K,
                                 cudaMemcpyDeviceToDevice, ctx_.stream()));
  kernels::zero_padding(masked_grad_.data(), T, B, K, in.device_lengths.data(), ctx_.stream());
  kernels::column_sum(masked_grad_.data(), rows, K, params_.grad(bias_), /*accumulate=*/true,
                      ctx_.stream());
  // dW {K, F} += dY^T {K, rows} * X {rows, F}
  gemm(ctx_, true, false, K, in_features_, rows, 1.0f, masked_grad_.data(), K, in.data.data(),
       in_features_, 1.0f, params_.grad(weight_), in_features_);
  if (!needs_input_grad_) return;
  grad_in.data.resize(in.data.shape());
  grad_in.copy_lengths(in, ctx_.stream());
  // dX = dY W; padding rows of dY are zero, so are those of dX.
  gemm(ctx_, false, false, rows, in_features_, K, 1.0f, masked_grad_.data(), K,
       params_.value(weight_), in_features_, 0.0f, grad_in.data.data(), in_features_);
}

}  // namespace ds2
