#include "nn/cuda/lookahead_cuda.h"

#include "core/error.h"
#include "kernels/lookahead.h"

namespace ds2 {

CudaLookahead::CudaLookahead(CudaContext& ctx, DeviceParameters& params, const Lookahead& cpu)
    : ctx_(ctx),
      params_(params),
      name_(cpu.name()),
      features_(cpu.features()),
      context_(cpu.context()),
      weight_(cpu.weight()) {}

void CudaLookahead::forward(const DeviceSequences& in, DeviceSequences& out, bool /*training*/) {
  check_sequences(in, name_);
  DS2_CHECK(in.frame_size() == features_ || in.data.numel() == 0,
            name_ << ": input " << shape_str(in.data.shape()) << " is not " << features_
                  << " features per frame");
  const int T = static_cast<int>(in.time()), B = static_cast<int>(in.batch());
  out.data.resize({T, B, features_});
  out.copy_lengths(in, ctx_.stream());
  kernels::lookahead_forward(in.data.data(), params_.value(weight_), in.device_lengths.data(), T, B,
                             features_, context_, out.data.data(), ctx_.stream());
}

void CudaLookahead::backward(const DeviceSequences& in, const DeviceSequences& out,
                             const DeviceSequences& grad_out, DeviceSequences& grad_in) {
  DS2_CHECK(grad_out.data.shape() == out.data.shape(),
            name_ << ": gradient shape " << shape_str(grad_out.data.shape())
                  << " differs from the output's " << shape_str(out.data.shape()));
  const int T = static_cast<int>(in.time()), B = static_cast<int>(in.batch());
  kernels::lookahead_backward_weights(in.data.data(), grad_out.data.data(),
                                      in.device_lengths.data(), T, B, features_, context_,
                                      params_.grad(weight_), ctx_.stream());
  if (!needs_input_grad_) return;
  grad_in.data.resize(in.data.shape());
  grad_in.copy_lengths(in, ctx_.stream());
  kernels::lookahead_backward_data(grad_out.data.data(), params_.value(weight_),
                                   in.device_lengths.data(), T, B, features_, context_,
                                   grad_in.data.data(), ctx_.stream());
}

}  // namespace ds2
