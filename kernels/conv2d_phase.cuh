// The input gradient of a convolution with frequency stride sf, split by frequency phase: the
// generic kernel (kernels/conv2d.cu) and the windowed one (kernels/conv2d_windowed.cu) both
// reduce each phase over only the taps that reach it.
//
//   const Conv2dPhase ph = conv2d_phase(g, phase);   // phase in [0, g.stride_f)
//   // input frequency f_q sf + phase <- taps jf = ph.r + sf q (q < ph.taps_f), output
//   // frequency f_q + ph.d - q; ph.freqs input frequencies have this phase
#pragma once

#include "kernels/conv2d.h"

namespace ds2::kernels {

struct Conv2dPhase {
  int r, taps_f, d, freqs;
};

__host__ __device__ inline Conv2dPhase conv2d_phase(const Conv2dGeometry& g, int phase) {
  Conv2dPhase ph;
  ph.r = (phase + g.kernel_f / 2) % g.stride_f;
  ph.taps_f = ph.r < g.kernel_f ? (g.kernel_f - ph.r + g.stride_f - 1) / g.stride_f : 0;
  ph.d = (phase + g.kernel_f / 2 - ph.r) / g.stride_f;
  ph.freqs = phase < g.F ? (g.F - phase + g.stride_f - 1) / g.stride_f : 0;
  return ph;
}

}  // namespace ds2::kernels
