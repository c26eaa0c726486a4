#include "nn/cuda/activations_cuda.h"

#include "core/error.h"
#include "kernels/elementwise.h"

namespace ds2 {

CudaClippedReLU::CudaClippedReLU(CudaContext& ctx, const ClippedReLU& cpu)
    : ctx_(ctx), name_(cpu.name()), clip_(cpu.clip()) {}

void CudaClippedReLU::forward(const DeviceSequences& in, DeviceSequences& out, bool /*training*/) {
  check_sequences(in, name_);
  const cudaStream_t stream = ctx_.stream();
  out.data.resize(in.data.shape());
  out.copy_lengths(in, stream);
  kernels::clipped_relu(in.data.data(), out.data.data(), in.data.numel(), clip_, stream);
  zero_padding(out, stream);
}

void CudaClippedReLU::backward(const DeviceSequences& /*in*/, const DeviceSequences& out,
                               const DeviceSequences& grad_out, DeviceSequences& grad_in) {
  if (!needs_input_grad_) return;
  DS2_CHECK(grad_out.data.shape() == out.data.shape(),
            name_ << ": gradient shape " << shape_str(grad_out.data.shape())
                  << " differs from the output's " << shape_str(out.data.shape()));
  const cudaStream_t stream = ctx_.stream();
  grad_in.data.resize(out.data.shape());
  grad_in.copy_lengths(out, stream);
  kernels::clipped_relu_backward(out.data.data(), grad_out.data.data(), grad_in.data.data(),
                                 out.data.numel(), clip_, stream);
  zero_padding(grad_in, stream);
}

}  // namespace ds2
