// The bf16 convolution kernels kernels/conv2d.cu picks where the geometry fits (both DS2 conv
// layers; the input gradient only at time stride 1): instead of gathering every patch element with
// its own index arithmetic, a CTA stages the input window of its frames (all taps of a few
// channels, bf16, zero outside the utterance and the frequency range) into shared memory once, and
// every mma fragment register is then one 32-bit shared load at (column word + reduction word): the
// window layout makes each operand pair of the reduction two neighbouring bf16 values. Results
// match the generic kernels' contract (kernels/conv2d.h) with the same rounding of the operands;
// the sums run in a different order.
//
//   if (windowed::forward_usable(g))   // fragments: windowed::weight_fragments(g) uint4
//     windowed::forward(x, in_lengths, out_lengths, w, bias, g, fragments, y, stream);
//   if (windowed::data_usable(g))
//     windowed::backward_data(dy, out_lengths, in_lengths, w, g, fragments, dx, stream);
//   if (windowed::weights_usable(g))   // partials: weight_parts(g) x C_out x (K + 1) floats
//     int parts = windowed::backward_weights(x, in_lengths, dy, out_lengths, g, partials, stream);
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/conv2d.h"

namespace ds2::kernels::windowed {

// Which passes the windowed kernels take for this geometry (sizes that fit the CTA tiles and the
// shared memory; the input gradient only at time stride 1), and the workspace they need: the
// weight fragments of the forward and of every backward-data phase that is usable.
bool forward_usable(const Conv2dGeometry& g);
bool data_usable(const Conv2dGeometry& g);
bool weights_usable(const Conv2dGeometry& g);
int64_t weight_fragments(const Conv2dGeometry& g);  // uint4 elements

void forward(const float* x, const int* in_lengths, const int* out_lengths, const float* w,
             const float* bias, const Conv2dGeometry& g, uint4* fragments, float* y,
             cudaStream_t stream);

void backward_data(const float* dy, const int* out_lengths, const int* in_lengths, const float* w,
                   const Conv2dGeometry& g, uint4* fragments, float* dx, cudaStream_t stream);

// Weight gradient: partials {weight_parts(g), C_out, K + 1} (the last column the bias's), then
// the caller adds the parts in order. Returns the number of parts written (a function of the
// geometry, so the sums are the same on every device).
int weight_parts(const Conv2dGeometry& g);
int backward_weights(const float* x, const int* in_lengths, const float* dy, const int* out_lengths,
                     const Conv2dGeometry& g, float* partials, cudaStream_t stream);

}  // namespace ds2::kernels::windowed
