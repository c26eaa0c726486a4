// The convolution's workspace sizes (kernels/conv2d.h, conv2d_workspace_sizes), on the host: the
// training engine sizes every array once, at the largest batch, so no batch with fewer valid
// output frames may need more. The backward-weights partials once did (their partition count
// fell as positions grew), and the digits recipe's conv layer reallocated 10 times inside the
// training loop. The kernels' results are checked on a GPU (tests/nn/cuda/conv2d_cuda_test.cpp).
#include <gtest/gtest.h>

#include <string>

#include "kernels/conv2d.h"

namespace ds2::kernels {
namespace {

// {T, B, C, F} in, {T_out, B, C_out, F_out} out, kernel and stride (time, frequency).
Conv2dGeometry geometry(int C, int F, int C_out, int kernel_t, int kernel_f, int stride_f) {
  Conv2dGeometry g{};
  g.T = 400;
  g.B = 16;
  g.C = C;
  g.F = F;
  g.T_out = 200;
  g.C_out = C_out;
  g.F_out = (F + 2 * (kernel_f / 2) - kernel_f) / stride_f + 1;
  g.kernel_t = kernel_t;
  g.kernel_f = kernel_f;
  g.stride_t = 2;
  g.stride_f = stride_f;
  return g;
}

TEST(Conv2dWorkspace, NoSizeGrowsForFewerOutputFrames) {
  // The digits recipe's layer (16 mel bins, 11x9, 32 channels), DS2's first two (161 bins, 41x11
  // and 21x11 over 32 channels) and a small odd one.
  const Conv2dGeometry shapes[] = {geometry(1, 16, 32, 11, 9, 2), geometry(1, 161, 32, 41, 11, 2),
                                   geometry(32, 81, 32, 21, 11, 2), geometry(3, 13, 5, 3, 3, 1)};
  constexpr int kLargest = 3000;
  for (const Conv2dGeometry& g : shapes) {
    SCOPED_TRACE("C " + std::to_string(g.C) + " F " + std::to_string(g.F) + " C_out " +
                 std::to_string(g.C_out) + " kernel " + std::to_string(g.kernel_t) + "x" +
                 std::to_string(g.kernel_f));
    const Conv2dWorkspaceSizes most = conv2d_workspace_sizes(g, kLargest, /*weight_grad=*/true);
    ASSERT_GT(most.partials, 0);
    int larger = 0, first = 0;
    for (int frames = 1; frames < kLargest; ++frames) {
      const Conv2dWorkspaceSizes s = conv2d_workspace_sizes(g, frames, /*weight_grad=*/true);
      const bool fits = s.positions <= most.positions && s.taps <= most.taps &&
                        s.partials <= most.partials && s.fragments <= most.fragments;
      if (!fits && larger++ == 0) first = frames;
    }
    EXPECT_EQ(larger, 0) << "batches needing more than the largest's workspace, first at " << first
                         << " output frames";
  }
}

}  // namespace
}  // namespace ds2::kernels
