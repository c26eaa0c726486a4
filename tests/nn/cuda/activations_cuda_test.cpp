// CPU ClippedReLU vs CudaClippedReLU: exact agreement on valid frames, exact-zero padding of the
// output and of the input gradient even when the input and grad_out padding are not zero.
#include "nn/cuda/activations_cuda.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "support/cuda_compare.h"

namespace ds2 {
namespace {

void run_case(const Shape& shape, const std::vector<int>& lengths, float clip, bool needs_grad) {
  SCOPED_TRACE(shape_str(shape) + " clip " + std::to_string(clip));
  CudaContext ctx;
  Rng rng(shape[0] * 31 + shape[1]);
  ClippedReLU cpu("relu", clip);
  CudaClippedReLU gpu(ctx, cpu);
  EXPECT_EQ(gpu.name(), "relu");
  EXPECT_EQ(gpu.clip(), clip);
  cpu.set_needs_input_grad(needs_grad);
  gpu.set_needs_input_grad(needs_grad);

  const Sequences x = random_sequences(shape, lengths, rng, -0.5f * clip, 1.5f * clip, 4.0f);
  const Sequences dy = random_sequences(shape, lengths, rng, -1.0f, 1.0f, -3.0f);
  Sequences y_ref, dx_ref;
  cpu.forward(x, y_ref, true);
  cpu.backward(x, y_ref, dy, dx_ref);

  DeviceSequences xd, yd, dyd, dxd;
  upload(x, xd, ctx.stream());
  upload(dy, dyd, ctx.stream());
  for (bool training : {true, false}) {
    yd.data.resize(shape);
    poison(yd.data, ctx);
    gpu.forward(xd, yd, training);
    EXPECT_EQ(yd.lengths, lengths);
    expect_close(y_ref.data, download_tensor(yd.data, ctx), 0, 0, "forward");
  }
  dxd.data.resize(shape);
  poison(dxd.data, ctx);
  gpu.backward(xd, yd, dyd, dxd);
  const Tensor dx = download_tensor(dxd.data, ctx);
  if (needs_grad) {
    EXPECT_EQ(dxd.lengths, lengths);
    expect_close(dx_ref.data, dx, 0, 0, "input gradient");
  } else {
    for (int64_t i = 0; i < dx.numel(); ++i)
      ASSERT_TRUE(std::isnan(dx[i])) << "grad_in written without need at " << i;
  }
}

TEST(CudaClippedReLU, MatchesCpu) {
  DS2_REQUIRE_GPU();
  run_case({9, 3, 17}, {9, 4, 0}, 20.0f, true);
  run_case({5, 1, 3, 7}, {5}, 20.0f, true);  // {T, B, C, F}, batch 1
  run_case({13, 4, 5, 9}, {2, 13, 7, 1}, 1.5f, true);
  run_case({300, 2, 33}, {300, 123}, 20.0f, true);  // longer sequences
  run_case({6, 2, 5}, {6, 3}, 20.0f, false);
}

}  // namespace
}  // namespace ds2
