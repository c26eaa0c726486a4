// CudaDropout: the GPU twin of Dropout (nn/dropout.h), inverted dropout: in training each element
// is kept with probability 1-p and scaled by 1/(1-p); inference (and p = 0) is the identity. The
// k-th training forward since reseed(s) draws its mask from seed s + k (s = 0 until reseeded)
// with core/dropout_mask.h's counter-based hash, as the CPU layer does, so the same seed gives
// both layers the same mask. Padding frames of the output and input gradient are exactly zero in
// every mode.
//
//   Dropout cpu("rnn0.dropout", 0.1f);
//   CudaDropout drop(ctx, cpu);
//   drop.reseed(42);
//   drop.forward(x, y, /*training=*/true);   // y = x * mask / 0.9, mask kept for the backward
//   drop.backward(x, y, dy, dx);             // dx = dy * mask / 0.9
#pragma once

#include <cstdint>
#include <string>

#include "core/cuda/device_array.h"
#include "nn/cuda/cuda_layer.h"
#include "nn/dropout.h"

namespace ds2 {

class CudaDropout : public CudaLayer {
 public:
  CudaDropout(CudaContext& ctx, const Dropout& cpu);

  std::string name() const override { return name_; }
  float probability() const { return probability_; }
  void forward(const DeviceSequences& in, DeviceSequences& out, bool training) override;
  // Uses the mask of the last training forward (which must have had this input's size).
  void backward(const DeviceSequences& in, const DeviceSequences& out,
                const DeviceSequences& grad_out, DeviceSequences& grad_in) override;

  void reseed(uint64_t seed) { next_seed_ = seed; }
  // The seed the next training forward will use.
  uint64_t next_seed() const { return next_seed_; }

 private:
  CudaContext& ctx_;
  std::string name_;
  float probability_;
  uint64_t next_seed_ = 0;
  DeviceArray<float> mask_;  // 0 or 1/(1-p) per element, from the last training forward
  int64_t mask_size_ = -1;   // elements the mask covers; -1 before any training forward
};

}  // namespace ds2
