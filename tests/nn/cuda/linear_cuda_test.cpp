// Linear (CPU reference) vs CudaLinear on the same random inputs and weights.
#include "nn/cuda/linear_cuda.h"

#include <gtest/gtest.h>

#include "support/cuda_compare.h"

namespace ds2 {
namespace {

struct LinearCase {
  int T, B, F, K;
  std::vector<int> lengths;
  bool input_grad;
};

class LinearCudaTest : public ::testing::TestWithParam<LinearCase> {};

TEST_P(LinearCudaTest, MatchesCpu) {
  DS2_REQUIRE_GPU();
  const LinearCase c = GetParam();
  CudaContext ctx;
  ParameterStore store;
  Linear cpu("fc", store, c.F, c.K);
  cpu.set_needs_input_grad(c.input_grad);
  store.finalize();
  Rng rng(c.T * 131 + c.F);
  store.initialize(rng);
  DeviceParameters params(ctx, store);
  CudaLinear gpu(ctx, params, cpu);

  Sequences x = random_sequences({c.T, c.B, c.F}, c.lengths, rng);
  Sequences y, dy, dx;
  cpu.forward(x, y, true);
  dy = random_sequences({c.T, c.B, c.K}, c.lengths, rng);
  store.zero_grads();
  cpu.backward(x, y, dy, dx);

  DeviceSequences xd, yd, dyd, dxd;
  upload(x, xd, ctx.stream());
  upload(dy, dyd, ctx.stream());
  yd.data.resize({c.T, c.B, c.K});
  poison(yd.data, ctx);
  gpu.forward(xd, yd, true);
  expect_close(y.data, download_tensor(yd.data, ctx), 1e-5, 1e-5, "forward");
  if (c.input_grad) {
    dxd.data.resize({c.T, c.B, c.F});
    poison(dxd.data, ctx);
  }
  gpu.backward(xd, yd, dyd, dxd);
  if (c.input_grad) expect_close(dx.data, download_tensor(dxd.data, ctx), 1e-5, 1e-5, "dx");
  Tensor grads;
  params.download_grads(grads);
  expect_close(store.grads(), grads, 1e-4, 1e-5, "parameter gradients");
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearCudaTest,
                         ::testing::Values(LinearCase{1, 1, 1, 1, {1}, true},
                                           LinearCase{7, 3, 37, 29, {7, 0, 4}, true},
                                           LinearCase{50, 4, 192, 29, {50, 31, 50, 1}, false},
                                           LinearCase{13, 1, 65, 5, {13}, true}));

}  // namespace
}  // namespace ds2
