// The host side of the persistent kernels' operands (kernels/persistent_rnn_operands.h): what
// every launch checks and the step order it derives. No GPU needed: the pointers are never read.
#include "kernels/persistent_rnn_operands.h"

#include <gtest/gtest.h>

#include <string>

namespace ds2::kernels {
namespace {

PrnnDirection full_direction(float* buf, bool reverse) {
  PrnnDirection p;
  p.u = buf;
  p.x = buf + 1;
  p.ld_x = 7;
  p.h = buf + 2;
  p.ld_h = 8;
  p.y = buf + 3;
  p.ld_y = 9;
  p.reverse = reverse;
  return p;
}

std::string error_of(const PrnnDirection& p, bool backward, bool needs_layout) {
  float xbuf[1];
  try {
    prnn_device_direction("sparse persistent RNN", p, 1, backward, xbuf, needs_layout);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PersistentRnnOperands, CopiesOperandsAndDerivesTheStepOrder) {
  float buf[4];
  uint16_t xbuf[2];
  for (bool reverse : {false, true})
    for (bool backward : {false, true}) {
      const PrnnDirection p = full_direction(buf, reverse);
      const PrnnDeviceDirection<uint16_t> d =
          prnn_device_direction("persistent RNN", p, 0, backward, xbuf + 1);
      EXPECT_EQ(d.u, buf);
      EXPECT_EQ(d.x, buf + 1);
      EXPECT_EQ(d.h, buf + 2);
      EXPECT_EQ(d.y, buf + 3);
      EXPECT_EQ(d.xbuf, xbuf + 1);
      EXPECT_EQ(d.ld_x, 7);
      EXPECT_EQ(d.ld_h, 8);
      EXPECT_EQ(d.ld_y, 9);
      // The forward runs the reverse direction from the last frame down; backward-data the
      // opposite of its forward.
      EXPECT_EQ(d.descending, reverse != backward ? 1 : 0) << reverse << backward;
    }
}

TEST(PersistentRnnOperands, MissingOperandsNameTheKernelAndDirection) {
  float buf[4];
  PrnnDirection p = full_direction(buf, false);
  EXPECT_EQ(error_of(p, true, false), "");
  EXPECT_NE(error_of(p, true, true).find("sparse persistent RNN: null operand of direction 1"),
            std::string::npos);  // the sparse kernel needs its layout
  p.h = nullptr;
  EXPECT_EQ(error_of(p, false, false), "");  // forward does not read h
  EXPECT_NE(error_of(p, true, false).find("null operand of direction 1"), std::string::npos);
  p = full_direction(buf, false);
  p.y = nullptr;
  EXPECT_NE(error_of(p, false, false).find("null operand"), std::string::npos);
}

}  // namespace
}  // namespace ds2::kernels
