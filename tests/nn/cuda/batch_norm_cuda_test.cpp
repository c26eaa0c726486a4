// CPU BatchNorm vs CudaBatchNorm: forward (training and inference), running statistics,
// backward (dx, dgamma, dbeta) for {T, B, F} and {T, B, C, F} data, odd sizes, batch 1, unequal
// lengths with an empty and a full-length utterance, and shapes large enough for several
// reduction chunks; each case with batch statistics and with per-utterance statistics
// (NormStatistics::kUtterance). Tolerances: forward atol 1e-5 rtol 1e-4; running statistics 1e-6 /
// 1e-5; backward and parameter gradients atol 1e-4 rtol 1e-4 (sums over up to ~10^5 values, double
// accumulation on both sides, float rounding of the per-value terms only).
#include "nn/cuda/batch_norm_cuda.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/cuda/device_array.h"
#include "support/cuda_compare.h"

namespace ds2 {
namespace {

struct Case {
  Shape shape;  // {T, B, C} or {T, B, C, F}
  std::vector<int> lengths;
};

std::string case_name(const Case& c) {
  return shape_str(c.shape);
}

enum class Mode { kTraining, kInference, kTrainingNoInputGrad };

const char* mode_name(Mode m) {
  return m == Mode::kTraining ? "training" : m == Mode::kInference ? "inference" : "no-input-grad";
}

void check_case(CudaContext& ctx, const Case& c, Mode mode, uint64_t seed,
                NormStatistics statistics = NormStatistics::kBatch) {
  const std::string what =
      case_name(c) + " " + mode_name(mode) + " " + norm_statistics_name(statistics);
  SCOPED_TRACE(what);
  Rng rng(seed);
  const int C = static_cast<int>(c.shape[2]);
  ParameterStore store;
  BatchNorm cpu("bn", store, C, /*momentum=*/0.1f, statistics);
  store.finalize();
  store.initialize(rng);
  for (int i = 0; i < C; ++i) {
    store.value(cpu.gamma())[i] = rng.uniform(0.5f, 1.5f);
    store.value(cpu.beta())[i] = rng.uniform(-0.5f, 0.5f);
    if (cpu.per_utterance()) continue;  // no running statistics
    store.value(cpu.running_mean())[i] = rng.uniform(-0.5f, 0.5f);
    store.value(cpu.running_var())[i] = rng.uniform(0.5f, 2.0f);
  }
  fill_uniform(store.grads(), rng);  // gradients accumulate (+=) onto what is there

  DeviceParameters params(ctx, store);
  upload(store.grads().data(), store.grads().numel(), params.grads(), ctx.stream());
  CudaBatchNorm gpu(ctx, params, cpu);
  const bool input_grad = mode != Mode::kTrainingNoInputGrad;
  const bool training = mode != Mode::kInference;
  cpu.set_needs_input_grad(input_grad);
  gpu.set_needs_input_grad(input_grad);

  // A one-frame utterance of {T, B, F} data has zero variance of its own: both sides then scale
  // float rounding by gamma / sqrt(eps) (~300) and differ by ~1e-4, so per utterance such an
  // utterance gets two frames (batch statistics keep the case).
  std::vector<int> lengths = c.lengths;
  if (cpu.per_utterance() && c.shape.size() == 3)
    for (int& len : lengths) len = len == 1 ? 2 : len;
  // Channel means away from zero, so a wrong mean shows.
  Sequences x = random_sequences(c.shape, lengths, rng, -1.0f, 3.0f, /*padding_value=*/7.0f);
  Sequences dy = random_sequences(c.shape, lengths, rng, -1.0f, 1.0f, /*padding_value=*/-5.0f);

  Sequences y_ref, dx_ref;
  cpu.forward(x, y_ref, training);
  DeviceSequences xd, yd, dyd, dxd;
  upload(x, xd, ctx.stream());
  upload(dy, dyd, ctx.stream());
  yd.data.resize(c.shape);
  poison(yd.data, ctx);
  gpu.forward(xd, yd, training);
  const Tensor y = download_tensor(yd.data, ctx);
  expect_close(y_ref.data, y, 1e-5, 1e-4, "forward");
  EXPECT_EQ(nonzero_padding(y, lengths), 0);
  EXPECT_EQ(yd.lengths, lengths);

  // Running statistics (updated by a training forward, untouched by an inference one).
  ParameterStore mirror;
  BatchNorm mirror_layer("bn", mirror, C, 0.1f, statistics);
  mirror.finalize();
  params.download_to(mirror);
  expect_close(store.buffers(), mirror.buffers(), 1e-6, 1e-5, "running statistics");

  cpu.backward(x, y_ref, dy, dx_ref);
  dxd.data.resize(c.shape);
  poison(dxd.data, ctx);
  gpu.backward(xd, yd, dyd, dxd);
  if (input_grad) {
    const Tensor dx = download_tensor(dxd.data, ctx);
    expect_close(dx_ref.data, dx, 1e-4, 1e-4, "dx");
    EXPECT_EQ(nonzero_padding(dx, lengths), 0);
  }
  Tensor grads;
  params.download_grads(grads);
  expect_close(store.grads(), grads, 1e-4, 1e-4, "dgamma/dbeta");
}

const Case kCases[] = {
    {{9, 4, 37}, {9, 0, 5, 3}},
    {{7, 1, 37}, {7}},
    {{9, 4, 3, 7}, {9, 0, 5, 3}},
    {{5, 1, 2, 33}, {5}},
    // Several reduction chunks: 2100 rows of 70 features; 600 rows of 4 channels x 41 positions.
    {{300, 7, 70}, {300, 0, 211, 299, 1, 150, 77}},
    {{120, 5, 4, 41}, {120, 0, 60, 119, 33}},
};

TEST(CudaBatchNorm, MatchesCpu) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  uint64_t seed = 100;
  for (NormStatistics s : {NormStatistics::kBatch, NormStatistics::kUtterance})
    for (const Case& c : kCases)
      for (Mode m : {Mode::kTraining, Mode::kInference, Mode::kTrainingNoInputGrad})
        check_case(ctx, c, m, ++seed, s);
}

// More frame rows (T * B) than 8 rows per block x 65535 blocks of grid.y: the elementwise passes
// take more rows per block, in both the float4 (4 features) and the scalar (3) layout.
TEST(CudaBatchNorm, MoreRowsThanOneGridDimensionHolds) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  check_case(ctx, {{300000, 2, 4}, {300000, 250001}}, Mode::kTraining, 11);
  check_case(ctx, {{300000, 2, 3}, {299999, 300000}}, Mode::kTraining, 12);
  check_case(ctx, {{300000, 2, 4}, {300000, 250001}}, Mode::kTraining, 13,
             NormStatistics::kUtterance);
}

// Every utterance empty: the output is zeros, the running statistics stay, gradients are zero.
TEST(CudaBatchNorm, AllPaddingBatch) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  check_case(ctx, {{4, 2, 5}, {0, 0}}, Mode::kTraining, 7);
  check_case(ctx, {{4, 2, 3, 6}, {0, 0}}, Mode::kTraining, 8);
  check_case(ctx, {{4, 2, 5}, {0, 0}}, Mode::kTraining, 9, NormStatistics::kUtterance);
}

class CudaBatchNormRepeat : public ::testing::TestWithParam<NormStatistics> {};

TEST_P(CudaBatchNormRepeat, IsBitwiseIdenticalAndAllocationFree) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  Rng rng(9);
  const Shape shape{150, 6, 3, 29};
  const std::vector<int> lengths{150, 40, 0, 149, 77, 12};
  ParameterStore store;
  BatchNorm cpu("bn", store, 3, 0.1f, GetParam());
  store.finalize();
  store.initialize(rng);
  DeviceParameters params(ctx, store);
  CudaBatchNorm gpu(ctx, params, cpu);
  DeviceSequences xd, yd, dyd, dxd;
  upload(random_sequences(shape, lengths, rng), xd, ctx.stream());
  upload(random_sequences(shape, lengths, rng), dyd, ctx.stream());
  Tensor y[2], dx[2], grads[2];
  int64_t allocations = 0;
  for (int run = 0; run < 2; ++run) {
    params.upload_from(store);
    params.zero_grads();
    if (run == 1) allocations = device_allocations();
    gpu.forward(xd, yd, true);
    gpu.backward(xd, yd, dyd, dxd);
    if (run == 1) {
      EXPECT_EQ(device_allocations(), allocations) << "second step allocated";
    }
    y[run] = download_tensor(yd.data, ctx);
    dx[run] = download_tensor(dxd.data, ctx);
    params.download_grads(grads[run]);
  }
  expect_close(y[0], y[1], 0, 0, "forward repeat");
  expect_close(dx[0], dx[1], 0, 0, "dx repeat");
  expect_close(grads[0], grads[1], 0, 0, "grads repeat");
}

INSTANTIATE_TEST_SUITE_P(Statistics, CudaBatchNormRepeat,
                         ::testing::Values(NormStatistics::kBatch, NormStatistics::kUtterance),
                         [](const auto& info) { return norm_statistics_name(info.param); });

}  // namespace
}  // namespace ds2
