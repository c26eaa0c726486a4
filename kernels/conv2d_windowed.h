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
//   if (windowed::weights_usable(g))   // then add partials' parts in order into dW and db
//     int parts = windowed::backward_weights(x, in_lengths, dy, out_lengths, g, partials, stream);
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/conv2d.h"

namespace ds2::kernels::windowed {

// A correlation over a window that slides by st frames in time:
//   out[t, b, m, fo * out_stride + out_offset] = bias[m] +
//       sum_{c < C, i < kt, j < J} A(m, c, i, j) in[t st - pt + i, b, c, fo * sf - pf + j]
// for t < out_lengths[b], fo < F_out; input frames t >= in_lengths[b] and frequencies outside
// [0, F_in) read as zero. The forward pass is one such window; the input gradient is one per
// frequency phase, over dy with the kernel flipped (conv2d_windowed.cu).
struct Window {
  int T_in, B, C, F_in;
  int T_out, M, F_out;
  int out_pitch, out_stride, out_offset;
  int kt, J, st, sf, pt, pf;  // J even: the tap count rounded up, extra taps weigh zero
};

struct Plan {
  bool ok = false;
  int frames = 0;                           // output frames per CTA
  int chunk_channels = 0;                   // input channels staged at a time
  int chunks = 0, steps = 0, m_blocks = 0;  // steps: k16 steps per chunk
  int copies = 0, row_words = 0, rows = 0;  // staging: copies of each row (shifted by one), words
  int words = 0;                            // staged words per chunk
  int smem_bytes = 0;
  int64_t weight_fragments = 0;  // uint4 per launch: m_blocks x chunks x steps x 2 x 32
};

Plan plan_window(const Window& w);

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

// Weight gradient: partials {parts, C_out, K + 1} (the last column the bias's), then the caller
// adds the parts in order. Returns the number of parts written (a function of the geometry).
struct WeightPlan {
  bool ok = false;
  int chunk_channels = 0, chunks = 0, m_blocks = 0;
  int frames = 0, dy_frames = 0, fo_pairs = 0, dy_row_words = 0;
  int rows = 0, x_row_words = 0, ksteps = 0;
  int tiles = 0, tiles_per_part = 0, parts = 0;
  int smem_bytes = 0;
};
WeightPlan plan_weights(const Conv2dGeometry& g);
int backward_weights(const float* x, const int* in_lengths, const float* dy, const int* out_lengths,
                     const Conv2dGeometry& g, float* partials, cudaStream_t stream);

}  // namespace ds2::kernels::windowed
