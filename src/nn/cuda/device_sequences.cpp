#include "nn/cuda/device_sequences.h"

#include "core/cuda/check.h"
#include "kernels/elementwise.h"

namespace ds2 {

void DeviceSequences::set_lengths(const std::vector<int>& new_lengths, cudaStream_t stream) {
  lengths = new_lengths;
  device_lengths.reserve(std::max<int64_t>(1, static_cast<int64_t>(lengths.size())));
  lengths_staging.copy(lengths.data(), lengths.size() * sizeof(int), device_lengths.data(), stream);
}

void DeviceSequences::copy_lengths(const DeviceSequences& other, cudaStream_t stream) {
  lengths = other.lengths;
  device_lengths.reserve(std::max<int64_t>(1, static_cast<int64_t>(lengths.size())));
  if (!lengths.empty())
    DS2_CUDA_CHECK(cudaMemcpyAsync(device_lengths.data(), other.device_lengths.data(),
                                   lengths.size() * sizeof(int), cudaMemcpyDeviceToDevice, stream));
}

void upload(const Sequences& host, DeviceSequences& device, cudaStream_t stream) {
  upload(host.data, device.data, stream);
  device.set_lengths(host.lengths, stream);
}

void download(const DeviceSequences& device, Sequences& host, cudaStream_t stream) {
  host.lengths = device.lengths;
  download(device.data, host.data, stream);
}

void zero_padding(DeviceSequences& seq, cudaStream_t stream) {
  if (seq.data.numel() == 0) return;
  kernels::zero_padding(seq.data.data(), static_cast<int>(seq.time()),
                        static_cast<int>(seq.batch()), seq.frame_size(), seq.device_lengths.data(),
                        stream);
}

void check_sequences(const DeviceSequences& seq, const std::string& where) {
  check_sequence_shape(seq.data.shape(), seq.lengths, where);
}

}  // namespace ds2
