// The dropout mask as a function of (seed, element index): a splitmix64 hash, so the CPU layer
// (nn/dropout.h) and the GPU kernel (kernels::dropout_forward) draw the same mask from the same
// seed, any element can be drawn independently of the others (vectorizable, launch-shape
// independent), and a layer's whole random state is one seed per training forward.
//
//   float scale = ds2::dropout_scale(seed, i, /*p=*/0.2f);   // 0 or 1 / 0.8
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace ds2 {

// 32 well-mixed bits for element i of the stream `seed`.
DS2_HOST_DEVICE inline uint32_t counter_hash_u32(uint64_t seed, uint64_t i) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<uint32_t>(z >> 32);
}

// The seed a data-parallel rank's dropout continues from: each rank draws masks of its own (both
// engines salt their layers' next seeds with the rank).
DS2_HOST_DEVICE inline uint64_t salted_dropout_seed(uint64_t seed, uint64_t salt) {
  return seed ^ (salt * 0x9E3779B97F4A7C15ull);
}

// Inverted dropout's factor for element i: kept (uniform draw >= p) scales by 1 / (1 - p).
DS2_HOST_DEVICE inline float dropout_scale(uint64_t seed, uint64_t i, float p) {
  const float u = static_cast<float>(counter_hash_u32(seed, i) >> 8) * (1.0f / 16777216.0f);
  return u >= p ? 1.0f / (1.0f - p) : 0.0f;
}

}  // namespace ds2
