#include "nn/cuda/dropout_cuda.h"

#include "core/cuda/check.h"
#include "core/error.h"
#include "kernels/elementwise.h"

namespace ds2 {

namespace {
void copy_device(const float* src, float* dst, int64_t n, cudaStream_t stream) {
  if (n > 0)
    DS2_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(float),
                                   cudaMemcpyDeviceToDevice, stream));
}
}  // namespace

CudaDropout::CudaDropout(CudaContext& ctx, const Dropout& cpu)
    : ctx_(ctx), name_(cpu.name()), probability_(cpu.probability()) {}

void CudaDropout::forward(const DeviceSequences& in, DeviceSequences& out, bool training) {
  check_sequences(in, name_);
  const cudaStream_t stream = ctx_.stream();
  const int64_t n = in.data.numel();
  out.data.resize(in.data.shape());
  out.copy_lengths(in, stream);
  if (!training || probability_ == 0.0f) {
    copy_device(in.data.data(), out.data.data(), n, stream);
  } else {
    mask_.reserve(n);
    kernels::dropout_forward(in.data.data(), out.data.data(), mask_.data(), n, probability_,
                             next_seed_++, stream);
    mask_size_ = n;
  }
  // The CPU layer copies the input's padding through in the identity case; the layer contract
  // (exact-zero output padding) is kept here in every mode, since the input's padding is only
  // promised finite.
  zero_padding(out, stream);
}

void CudaDropout::backward(const DeviceSequences& in, const DeviceSequences& /*out*/,
                           const DeviceSequences& grad_out, DeviceSequences& grad_in) {
  if (!needs_input_grad_) return;
  DS2_CHECK(grad_out.data.shape() == in.data.shape(),
            name_ << ": gradient shape " << shape_str(grad_out.data.shape())
                  << " differs from the input's " << shape_str(in.data.shape()));
  const cudaStream_t stream = ctx_.stream();
  const int64_t n = in.data.numel();
  grad_in.data.resize(in.data.shape());
  grad_in.copy_lengths(in, stream);
  if (probability_ == 0.0f) {
    copy_device(grad_out.data.data(), grad_in.data.data(), n, stream);
  } else {
    DS2_CHECK(mask_size_ == n, name_ << ": backward of " << n
                                     << " elements without a training forward of that size");
    kernels::multiply(grad_out.data.data(), mask_.data(), grad_in.data.data(), n, stream);
  }
  zero_padding(grad_in, stream);
}

}  // namespace ds2
