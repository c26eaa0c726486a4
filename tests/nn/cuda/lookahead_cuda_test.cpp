// CudaLookahead (nn/cuda/lookahead_cuda.h) against the CPU Lookahead: forward, dx and the weight
// gradient (accumulated onto random gradients), outputs poisoned first, input padding set to a
// non-zero value that must not leak. Shapes: odd feature counts, batch 1, a context longer than
// the sequence, unequal lengths with an empty and a full utterance, T = 1. fp32 sums in another
// order than the CPU's only in dW (atol 1e-5, rtol 1e-4).
#include "nn/cuda/lookahead_cuda.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/cuda_compare.h"

namespace ds2 {
namespace {

struct LookaheadCase {
  int T, B, F, context;
  std::vector<int> lengths;
};

TEST(CudaLookahead, MatchesCpu) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  const LookaheadCase cases[] = {{30, 4, 37, 5, {30, 0, 17, 3}},
                                 {25, 1, 64, 10, {25}},
                                 {6, 3, 19, 9, {6, 2, 5}},
                                 {1, 2, 8, 2, {1, 0}},
                                 {200, 8, 512, 20, {200, 150, 199, 1, 64, 200, 33, 120}}};
  uint64_t seed = 70;
  for (const LookaheadCase& c : cases) {
    SCOPED_TRACE("T " + std::to_string(c.T) + " B " + std::to_string(c.B) + " F " +
                 std::to_string(c.F) + " context " + std::to_string(c.context));
    Rng rng(++seed);
    ParameterStore store;
    Lookahead cpu("lookahead", store, c.F, c.context);
    store.finalize();
    store.initialize(rng);
    fill_uniform(store.grads(), rng);  // gradients accumulate (+=) onto what is there
    DeviceParameters params(ctx, store);
    upload(store.grads().data(), store.grads().numel(), params.grads(), ctx.stream());
    CudaLookahead gpu(ctx, params, cpu);

    Sequences x = random_sequences({c.T, c.B, c.F}, c.lengths, rng, -1.0f, 1.0f, 3.0f);
    Sequences dy = random_sequences({c.T, c.B, c.F}, c.lengths, rng, -1.0f, 1.0f, -4.0f);
    Sequences y_ref, dx_ref;
    cpu.forward(x, y_ref, true);
    cpu.backward(x, y_ref, dy, dx_ref);

    DeviceSequences xd, yd, dyd, dxd;
    upload(x, xd, ctx.stream());
    upload(dy, dyd, ctx.stream());
    yd.data.resize({c.T, c.B, c.F});
    poison(yd.data, ctx);
    dxd.data.resize({c.T, c.B, c.F});
    poison(dxd.data, ctx);
    gpu.forward(xd, yd, true);
    gpu.backward(xd, yd, dyd, dxd);
    const Tensor y = download_tensor(yd.data, ctx), dx = download_tensor(dxd.data, ctx);
    expect_close(y_ref.data, y, 1e-6, 1e-5, "forward");
    expect_close(dx_ref.data, dx, 1e-6, 1e-5, "dx");
    EXPECT_EQ(nonzero_padding(y, c.lengths), 0);
    EXPECT_EQ(nonzero_padding(dx, c.lengths), 0);
    Tensor grads;
    params.download_grads(grads);
    expect_close(store.grads(), grads, 1e-5, 1e-4, "dW");
  }
}

}  // namespace
}  // namespace ds2
