// DeviceSequences: the GPU twin of Sequences (nn/sequences.h), with the same time-major layout
// and the same padding rule (padding frames of outputs are exactly zero). Lengths live on the
// host, where layers plan their work, and on the device, where kernels mask padding.
//
//   ds2::DeviceSequences x;
//   ds2::upload(host_batch.features, x, ctx.stream());    // data and lengths
//   layer.forward(x, y, /*training=*/true);
//   ds2::Sequences back;  ds2::download(y, back, ctx.stream());
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "core/cuda/device_tensor.h"
#include "core/cuda/pinned_upload.h"
#include "nn/sequences.h"

namespace ds2 {

struct DeviceSequences {
  DeviceTensor data;
  std::vector<int> lengths;         // host copy, lengths[b] valid frames of utterance b
  DeviceArray<int> device_lengths;  // the same on the device (after set_lengths)
  PinnedUpload lengths_staging;     // set_lengths copies through it: no host sync mid-step

  int64_t time() const { return data.dim(0); }
  int64_t batch() const { return data.dim(1); }
  int64_t frame_size() const {
    const int64_t frames = data.dim(0) * data.dim(1);
    return frames > 0 ? data.numel() / frames : 0;
  }
  // Stores `lengths` on host and device (queued on `stream`).
  void set_lengths(const std::vector<int>& new_lengths, cudaStream_t stream);
  // Copies lengths (host and device) from another sequence batch (queued on `stream`).
  void copy_lengths(const DeviceSequences& other, cudaStream_t stream);
};

void upload(const Sequences& host, DeviceSequences& device, cudaStream_t stream);
void download(const DeviceSequences& device, Sequences& host, cudaStream_t stream);

// Sets every padding frame (t >= lengths[b]) of `seq` to zero, on `stream`.
void zero_padding(DeviceSequences& seq, cudaStream_t stream);

// Throws ds2::Error naming `where` unless the shape and lengths are consistent (host check).
void check_sequences(const DeviceSequences& seq, const std::string& where);

}  // namespace ds2
