// One direction's operands as the persistent RNN kernels read them on the device (the dense
// fp32-math, tensor-core and sparse kernels), and the host-side check that builds them from a
// PrnnDirection. Each kernel's exchange array has its own element type and layout.
//
//   a.dir[i] = prnn_device_direction("persistent RNN", dirs[i], i, backward, ws + offset);
#pragma once

#include <cstdint>

#include "core/error.h"
#include "kernels/persistent_rnn.h"

namespace ds2::kernels {

template <class Exchange>
struct PrnnDeviceDirection {
  const float* u;
  const uint32_t* layout;  // the sparse kernel only
  const float* x;
  const float* h;
  float* y;
  Exchange* xbuf;  // this direction's double-buffered state exchange
  long long ld_x, ld_h, ld_y;
  int descending;  // steps visit t = T-1 .. 0
};

// Checks the operands the kernel needs (`kernel` names it in the message; `i` the direction; the
// layout only when `needs_layout`) and fills the device view, with `xbuf` as its exchange.
template <class Exchange>
PrnnDeviceDirection<Exchange> prnn_device_direction(const char* kernel, const PrnnDirection& p,
                                                    int i, bool backward, Exchange* xbuf,
                                                    bool needs_layout = false) {
  DS2_CHECK(p.u && p.x && p.y && (!backward || p.h) && (!needs_layout || p.layout),
            kernel << ": null operand of direction " << i);
  PrnnDeviceDirection<Exchange> d{};
  d.u = p.u;
  d.layout = p.layout;
  d.x = p.x;
  d.h = p.h;
  d.y = p.y;
  d.xbuf = xbuf;
  d.ld_x = p.ld_x;
  d.ld_h = p.ld_h;
  d.ld_y = p.ld_y;
  // The forward visits the reverse direction from T - 1 down; backward-data the opposite.
  d.descending = p.reverse != backward ? 1 : 0;
  return d;
}

}  // namespace ds2::kernels
