#include "nn/cuda/device_parameters.h"

#include "core/cuda/check.h"
#include "core/cuda/device_tensor.h"
#include "kernels/elementwise.h"

namespace ds2 {

DeviceParameters::DeviceParameters(const CudaContext& ctx, const ParameterStore& host)
    : ctx_(ctx),
      layout_(host),
      num_values_(host.values().numel()),
      num_buffers_(host.buffers().numel()) {
  DS2_CHECK(host.finalized(), "DeviceParameters: the parameter store is not finalized");
  values_.reserve(std::max<int64_t>(1, num_values_));
  grads_.reserve(std::max<int64_t>(1, num_values_));
  buffers_.reserve(std::max<int64_t>(1, num_buffers_));
  upload_from(host);
  zero_grads();
}

int64_t DeviceParameters::offset(ParamRef ref) const {
  return layout_.entry(ref).offset;
}

void DeviceParameters::zero_grads() {
  kernels::fill(grads_.data(), num_values_, 0.0f, ctx_.stream());
}

void DeviceParameters::upload_from(const ParameterStore& host) {
  DS2_CHECK(host.values().numel() == num_values_ && host.buffers().numel() == num_buffers_,
            "DeviceParameters: the store's layout changed");
  upload(host.values().data(), num_values_, values_.data(), ctx_.stream());
  upload(host.buffers().data(), num_buffers_, buffers_.data(), ctx_.stream());
  // The host store may change right after this returns: finish the (pageable) copies first.
  DS2_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream()));
}

void DeviceParameters::download_to(ParameterStore& host) const {
  download(values_.data(), num_values_, host.values().data(), ctx_.stream());
  download(buffers_.data(), num_buffers_, host.buffers().data(), ctx_.stream());
}

void DeviceParameters::download_grads(Tensor& host) const {
  host.resize({num_values_});
  download(grads_.data(), num_values_, host.data(), ctx_.stream());
}

}  // namespace ds2
