// The GRU cell's backward for one neuron of one frame, in PyTorch's formulation (gate order r, z,
// n), shared by the CPU layer (nn/rnn_layer.cpp) and the GPU kernels (kernels/gru_cell.cuh and
// those that include it), so both backends compute the same expression in the same order.
//
//   GruGrads d = gru_cell_backward(dy + carry, r, z, n, hn, h_prev);   // d.dr, d.dz, d.dn, ...
//   store_gate_grads(d, dpre + k, dgates + k, H);   // neuron k's three gates, H apart
#pragma once

#include "core/host_device.h"

namespace ds2 {

struct GruGrads {
  float dr, dz, dn;  // dL/d(gate pre-activations): the input side's gradient is (dr, dz, dn)
  float dgn;         // dL/dg_n = dn r: the hidden side's is (dr, dz, dgn)
  float dh_prev;     // the direct path dh z (the recurrence adds (dr, dz, dgn) U)
};

// dh: dL/dh of this frame (from above plus the later frame's carry); r, z, n the forward's gates,
// hn = U_n h_prev + b_hn (what r multiplied), h_prev the previous frame's h.
DS2_HOST_DEVICE inline GruGrads gru_cell_backward(float dh, float r, float z, float n, float hn,
                                                  float h_prev) {
  GruGrads o;
  o.dn = dh * (1.0f - z) * (1.0f - n * n);
  o.dz = dh * (h_prev - n) * z * (1.0f - z);
  o.dr = o.dn * hn * r * (1.0f - r);
  o.dgn = o.dn * r;
  o.dh_prev = dh * z;
  return o;
}

// Neuron k's gate gradients where the layer keeps them, gates r, z, n `stride` apart from the
// given places: the input side's (dr, dz, dn) into dpre, the hidden side's (dr, dz, dgn) into
// dgates (both backends' step backward).
DS2_HOST_DEVICE inline void store_gate_grads(const GruGrads& g, float* dpre, float* dgates,
                                             int stride) {
  dpre[0] = g.dr;
  dpre[stride] = g.dz;
  dpre[2 * stride] = g.dn;
  dgates[0] = g.dr;
  dgates[stride] = g.dz;
  dgates[2 * stride] = g.dgn;
}

}  // namespace ds2
