// CPU Conv2d vs CudaConv2d (implicit GEMM): forward (training and inference), input gradients
// and accumulated weight/bias gradients on fresh random inputs with NaN-poisoned outputs, at
// scaled-down and full-kernel DS2 front-end shapes, odd sizes, C = 1 and C > 1, strides 1, 2 and
// 3, batch 1, unequal lengths (0 included), with and without bias, shapes that span several
// CTA tiles in every GEMM dimension (channels > 32, patch sizes around the 256-column tile,
// thousands of positions), and needs_input_grad false.
#include "nn/cuda/conv2d_cuda.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/bf16.h"
#include "core/cuda/device_array.h"
#include "core/error.h"
#include "kernels/conv2d_windowed.h"
#include "support/cuda_compare.h"

namespace ds2 {
namespace {

struct ConvCase {
  std::string what;
  int cin, cout, kt, kf, st, sf;
  bool bias;
  Shape in_shape;            // {T, B, F} (cin 1) or {T, B, C, F}
  std::vector<int> lengths;  // per utterance
  bool needs_input_grad = true;
  Precision precision = Precision::kFp32;
};

// Rounds to bf16 and back: what the bf16 kernels multiply.
void round_to_bf16(Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = bf16_to_float(float_to_bf16(t[i]));
}
void round_to_bf16(ParameterStore& store, ParamRef ref) {
  float* v = store.value(ref);
  for (int64_t i = 0; i < store.entry(ref).numel; ++i) v[i] = bf16_to_float(float_to_bf16(v[i]));
}

int64_t count_nan(const Tensor& t) {
  int64_t n = 0;
  for (int64_t i = 0; i < t.numel(); ++i) n += std::isnan(t[i]);
  return n;
}

// `tol` scales the tolerances (large patches sum thousands of products in another order). With
// bf16 the CPU reference gets the operands the GPU rounds (x, W, dy; the weight is rounded in the
// store, so both sides hold the same values) and the tolerances stay those of fp32: bf16 products
// are exact in fp32, and both sides accumulate in fp32.
void run_case(const ConvCase& c, double tol = 1.0) {
  SCOPED_TRACE(c.what + (c.precision == Precision::kBf16 ? " (bf16)" : ""));
  CudaContext ctx;
  ctx.set_matmul_precision(c.precision);
  const bool bf16 = c.precision == Precision::kBf16;
  Rng rng(101 + c.cout * 7 + c.kt);
  ParameterStore store;
  Conv2d cpu("conv", store, c.cin, c.cout, c.kt, c.kf, c.st, c.sf, c.bias);
  cpu.set_algorithm(ConvAlgorithm::kPatches);
  store.finalize();
  store.initialize(rng);
  if (bf16) round_to_bf16(store, cpu.weight());
  cpu.set_needs_input_grad(c.needs_input_grad);
  DeviceParameters params(ctx, store);
  CudaConv2d gpu(ctx, params, cpu);
  gpu.set_needs_input_grad(c.needs_input_grad);

  const Sequences x = random_sequences(c.in_shape, c.lengths, rng, -1.0f, 1.0f, 3.0f);
  Sequences x_ref = x;  // what the CPU convolves
  if (bf16) round_to_bf16(x_ref.data);
  const int T = static_cast<int>(c.in_shape[0]), B = static_cast<int>(c.in_shape[1]);
  const int F = static_cast<int>(c.in_shape.back());
  const Shape out_shape{cpu.output_length(T), B, c.cout, cpu.output_freq(F)};
  ASSERT_EQ(gpu.output_length(T), cpu.output_length(T));
  ASSERT_EQ(gpu.output_freq(F), cpu.output_freq(F));

  // Forward, training then inference (the same for a convolution).
  Sequences y_ref;
  cpu.forward(x_ref, y_ref, true);
  ASSERT_EQ(y_ref.data.shape(), out_shape);
  DeviceSequences xd, yd;
  upload(x, xd, ctx.stream());
  for (bool training : {true, false}) {
    yd.data.resize(out_shape);
    poison(yd.data, ctx);
    gpu.forward(xd, yd, training);
    EXPECT_EQ(yd.lengths, y_ref.lengths);
    expect_close(y_ref.data, download_tensor(yd.data, ctx), 1e-5 * tol, 1e-4 * tol,
                 training ? "forward (training)" : "forward (inference)");
  }

  // Backward with random nonzero starting gradients on both sides (grads are accumulated) and
  // a grad_out whose padding is finite garbage.
  const Sequences dy = random_sequences(out_shape, y_ref.lengths, rng, -1.0f, 1.0f, -2.0f);
  Sequences dy_ref = dy;
  if (bf16) round_to_bf16(dy_ref.data);
  fill_uniform(store.grads(), rng);
  upload(store.grads().data(), store.grads().numel(), params.grads(), ctx.stream());
  Sequences dx_ref;
  cpu.backward(x_ref, y_ref, dy_ref, dx_ref);

  DeviceSequences dyd, dxd;
  upload(dy, dyd, ctx.stream());
  dxd.data.resize(x.data.shape());
  poison(dxd.data, ctx);
  gpu.backward(xd, yd, dyd, dxd);
  Tensor grads;
  params.download_grads(grads);
  expect_close(store.grads(), grads, 1e-4 * tol, 1e-4 * tol, "weight/bias gradients");
  if (c.needs_input_grad) {
    EXPECT_EQ(dxd.lengths, x.lengths);
    expect_close(dx_ref.data, download_tensor(dxd.data, ctx), 1e-5 * tol, 1e-4 * tol,
                 "input gradient");
  } else {
    const Tensor untouched = download_tensor(dxd.data, ctx);
    EXPECT_EQ(count_nan(untouched), untouched.numel()) << "grad_in written without need";
  }
}

TEST(CudaConv2d, Ds2FirstLayerShapes) {
  DS2_REQUIRE_GPU();
  // 1 -> 5 channels, kernel 11 x 9, stride 2 x 2 on {T, B, F} input (the first DS2 conv).
  run_case({"1->5 k11x9 s2x2 F16", 1, 5, 11, 9, 2, 2, true, {23, 3, 16}, {23, 10, 0}});
  run_case({"1->5 k11x9 s2x2 F17 batch 1", 1, 5, 11, 9, 2, 2, true, {14, 1, 17}, {14}});
  run_case({"1->5 k11x9 s2x2 F17 length 1", 1, 5, 11, 9, 2, 2, false, {9, 2, 17}, {1, 9}});
  run_case({"1->5 k11x9 s2x2 F17 unequal", 1, 5, 11, 9, 2, 2, true, {15, 3, 17}, {15, 6, 11}});
  // The full first DS2 kernel (K = 451: the bias column in the second 256-column tile of dW),
  // 32 output channels, 21 valid frames x 81 frequencies.
  run_case({"1->32 k11x41 s2x2 F161", 1, 32, 11, 41, 2, 2, true, {24, 2, 161}, {24, 17}}, 4.0);
}

TEST(CudaConv2d, Ds2SecondLayerShapes) {
  DS2_REQUIRE_GPU();
  // 5 -> 3 channels, kernel 5 x 3, stride 1 x 2 on {T, B, C, F} (the second DS2 conv).
  run_case({"5->3 k5x3 s1x2 F9", 5, 3, 5, 3, 1, 2, true, {12, 4, 5, 9}, {12, 0, 5, 11}});
  run_case({"5->3 k5x3 s1x2 F8 no bias", 5, 3, 5, 3, 1, 2, false, {12, 4, 5, 8}, {3, 12, 1, 7}});
  run_case({"5->3 k5x3 s1x2 F9 batch 1", 5, 3, 5, 3, 1, 2, true, {10, 1, 5, 9}, {10}});
  // The full second DS2 kernel (K = 7392 over 29 dW column tiles, 41 output frequencies, two
  // frequency phases of 41 and 40 input frequencies), channels cut to 8 -> 32 to keep the CPU
  // reference quick but the tile full.
  run_case({"8->32 k11x21 s1x2 F81", 8, 32, 11, 21, 1, 2, false, {9, 3, 8, 81}, {9, 4, 7}}, 4.0);
  // 32 -> 32 as in DS2, short utterances.
  run_case({"32->32 k11x21 s1x2 F81", 32, 32, 11, 21, 1, 2, true, {5, 2, 32, 81}, {5, 3}}, 4.0);
}

TEST(CudaConv2d, SeveralTilesInEveryDimension) {
  DS2_REQUIRE_GPU();
  // 40 output channels (two row tiles of the forward and dW, the second partial), 33 input
  // channels (two row tiles of backward-data), K = 33 * 3 * 3 = 297 (bias column in the second
  // column tile of dW), 18 frames x 20 frequencies (two column tiles), odd sizes throughout.
  run_case({"33->40 k3x3 s1x1 F20", 33, 40, 3, 3, 1, 1, true, {7, 3, 33, 20}, {7, 5, 6}}, 2.0);
  // K = 256 exactly: the bias column starts a tile of its own.
  run_case({"4->7 k8x8 s2x1 F13", 4, 7, 8, 8, 2, 1, true, {9, 2, 4, 13}, {9, 8}});
  // K = 255: the bias column is the last of the first tile.
  run_case({"5->6 k3x17 s1x2 F30", 5, 6, 3, 17, 1, 2, true, {6, 2, 5, 30}, {4, 6}});
  // Many positions (86 frames x 50 = 4300: 17 forward column tiles), a long dW reduction.
  run_case({"1->3 k5x5 s1x1 F50", 1, 3, 5, 5, 1, 1, true, {33, 4, 50}, {33, 31, 2, 20}});
}

TEST(CudaConv2d, OddKernelsStridesAndEdges) {
  DS2_REQUIRE_GPU();
  // Even kernels, unit stride, no bias.
  run_case({"2->3 k4x2 s1x1", 2, 3, 4, 2, 1, 1, false, {6, 2, 2, 5}, {3, 6}});
  // Time stride 3, some utterances shorter than the kernel's reach.
  run_case({"2->4 k3x3 s3x1", 2, 4, 3, 3, 3, 1, true, {10, 3, 2, 6}, {10, 1, 5}});
  // Frequency kernel wider than the input.
  run_case({"1->2 k3x7 s1x1 F3", 1, 2, 3, 7, 1, 1, true, {5, 2, 3}, {5, 2}});
  // Every utterance empty: only zero padding comes out, and no gradient is added.
  run_case({"all empty", 2, 3, 3, 3, 2, 2, true, {4, 2, 2, 5}, {0, 0}});
  // Stride larger than the kernel (frames and frequencies skipped entirely).
  run_case({"1->3 k2x3 s3x4", 1, 3, 2, 3, 3, 4, true, {13, 3, 11}, {13, 8, 2}});
  // Frequency stride 3 with a 1-wide kernel: phases no tap reaches (dx exactly zero there).
  run_case({"2->2 k3x1 s2x3 F10", 2, 2, 3, 1, 2, 3, true, {8, 2, 2, 10}, {8, 5}});
}

TEST(CudaConv2d, WithoutInputGradientOnlyParameterGradients) {
  DS2_REQUIRE_GPU();
  ConvCase c{"1->5 k11x9 s2x2 no input grad", 1, 5, 11, 9, 2, 2, true, {17, 3, 16}, {17, 4, 9}};
  c.needs_input_grad = false;
  run_case(c);
  c.what = "2->3 k3x5 s1x2 no input grad";
  c.cin = 2, c.cout = 3, c.kt = 3, c.kf = 5, c.st = 1, c.sf = 2;
  c.in_shape = {8, 2, 2, 11};
  c.lengths = {8, 3};
  run_case(c);
}

// bf16 operands on tensor cores (the context's matmul precision): the same shapes as above, in
// every GEMM dimension and at the full DS2 kernels, against the CPU given rounded operands.
TEST(CudaConv2d, Bf16TensorCoresMatchCpuOnRoundedOperands) {
  DS2_REQUIRE_GPU();
  std::vector<std::pair<ConvCase, double>> cases = {
      {{"1->5 k11x9 s2x2 F16", 1, 5, 11, 9, 2, 2, true, {23, 3, 16}, {23, 10, 0}}, 1.0},
      {{"1->5 k11x9 s2x2 F17 batch 1", 1, 5, 11, 9, 2, 2, true, {14, 1, 17}, {14}}, 1.0},
      {{"5->3 k5x3 s1x2 F8 no bias", 5, 3, 5, 3, 1, 2, false, {12, 4, 5, 8}, {3, 12, 1, 7}}, 1.0},
      {{"2->4 k3x3 s3x1", 2, 4, 3, 3, 3, 1, true, {10, 3, 2, 6}, {10, 1, 5}}, 1.0},
      {{"2->2 k3x1 s2x3 F10", 2, 2, 3, 1, 2, 3, true, {8, 2, 2, 10}, {8, 5}}, 1.0},
      {{"33->40 k3x3 s1x1 F20", 33, 40, 3, 3, 1, 1, true, {7, 3, 33, 20}, {7, 5, 6}}, 2.0},
      {{"4->7 k8x8 s2x1 F13", 4, 7, 8, 8, 2, 1, true, {9, 2, 4, 13}, {9, 8}}, 1.0},
      {{"1->3 k5x5 s1x1 F50", 1, 3, 5, 5, 1, 1, true, {33, 4, 50}, {33, 31, 2, 20}}, 1.0},
      {{"1->32 k11x41 s2x2 F161", 1, 32, 11, 41, 2, 2, true, {24, 2, 161}, {24, 17}}, 4.0},
      {{"32->32 k11x21 s1x2 F81", 32, 32, 11, 21, 1, 2, true, {5, 2, 32, 81}, {5, 3}}, 4.0},
      {{"all empty", 2, 3, 3, 3, 2, 2, true, {4, 2, 2, 5}, {0, 0}}, 1.0},
  };
  for (auto& [c, tol] : cases) {
    c.precision = Precision::kBf16;
    run_case(c, tol);
  }
  ConvCase no_dx{"1->5 k11x9 s2x2 no input grad", 1, 5, 11, 9, 2, 2, true, {17, 3, 16}, {17, 4, 9}};
  no_dx.needs_input_grad = false;
  no_dx.precision = Precision::kBf16;
  run_case(no_dx);
}

// bf16 runs the windowed kernels where they fit (kernels/conv2d_windowed.h; the input gradient
// only at time stride 1): several frame tiles with a partial last one, empty and one-frame
// utterances, batch 1, several channel chunks and output-channel blocks, even kernels, frequency
// strides 1 to 3 (one or two staged copies, up to three input-gradient phases), time strides 2
// and 3 (the full first DS2 layer among them), one tap wide, and a frequency range so wide that a
// CTA holds one frame.
TEST(CudaConv2d, Bf16WindowedKernelsMatchCpuOnRoundedOperands) {
  DS2_REQUIRE_GPU();
  std::vector<std::pair<ConvCase, double>> cases = {
      {{"32->32 k11x21 s1x2 F81 tiles", 32, 32, 11, 21, 1, 2, true, {40, 3, 32, 81}, {40, 23, 1}},
       4.0},
      {{"8->32 k11x21 s1x2 F81 batch 1", 8, 32, 11, 21, 1, 2, true, {17, 1, 8, 81}, {17}}, 4.0},
      {{"33->40 k3x3 s1x1 F20 empty", 33, 40, 3, 3, 1, 1, false, {9, 3, 33, 20}, {9, 0, 5}}, 2.0},
      {{"3->5 k4x6 s1x1 F15", 3, 5, 4, 6, 1, 1, true, {12, 2, 3, 15}, {12, 7}}, 1.0},
      {{"2->3 k3x7 s1x3 F22", 2, 3, 3, 7, 1, 3, true, {10, 2, 2, 22}, {10, 4}}, 1.0},
      {{"6->4 k3x1 s1x2 F9", 6, 4, 3, 1, 1, 2, true, {8, 2, 6, 9}, {8, 3}}, 1.0},
      {{"2->3 k3x5 s1x2 F700", 2, 3, 3, 5, 1, 2, true, {6, 2, 2, 700}, {6, 3}}, 1.0},
      {{"1->32 k11x41 s2x2 F161", 1, 32, 11, 41, 2, 2, true, {37, 3, 161}, {37, 20, 1}}, 4.0},
      {{"3->5 k4x3 s3x1 F10", 3, 5, 4, 3, 3, 1, true, {17, 2, 3, 10}, {17, 8}}, 1.0},
  };
  for (auto& [c, tol] : cases) {
    c.precision = Precision::kBf16;
    kernels::Conv2dGeometry g;
    g.T = static_cast<int>(c.in_shape[0]), g.B = static_cast<int>(c.in_shape[1]), g.C = c.cin;
    g.F = static_cast<int>(c.in_shape.back());
    g.kernel_t = c.kt, g.kernel_f = c.kf, g.stride_t = c.st, g.stride_f = c.sf, g.C_out = c.cout;
    g.T_out = (g.T + 2 * (c.kt / 2) - c.kt) / c.st + 1;
    g.F_out = (g.F + 2 * (c.kf / 2) - c.kf) / c.sf + 1;
    EXPECT_TRUE(kernels::windowed::forward_usable(g)) << c.what;
    EXPECT_TRUE(kernels::windowed::weights_usable(g)) << c.what;
    EXPECT_EQ(kernels::windowed::data_usable(g), c.st == 1) << c.what;
    run_case(c, tol);
  }
  ConvCase no_dx{"4->6 k5x3 s1x2 no input grad", 4, 6, 5, 3, 1, 2, true, {13, 2, 4, 16}, {13, 6}};
  no_dx.needs_input_grad = false;
  no_dx.precision = Precision::kBf16;
  run_case(no_dx);
}

void check_deterministic_and_allocation_free(Precision precision) {
  SCOPED_TRACE(precision_name(precision));
  CudaContext ctx;
  ctx.set_matmul_precision(precision);
  Rng rng(5);
  ParameterStore store;
  Conv2d cpu("conv", store, 5, 3, 5, 3, 1, 2, true);
  store.finalize();
  store.initialize(rng);
  DeviceParameters params(ctx, store);
  CudaConv2d gpu(ctx, params, cpu);
  const Sequences x = random_sequences({11, 3, 5, 9}, {11, 7, 4}, rng, -1.0f, 1.0f, 1.5f);
  DeviceSequences xd, yd, dyd, dxd;
  upload(x, xd, ctx.stream());
  gpu.forward(xd, yd, true);
  Sequences y;
  download(yd, y, ctx.stream());
  const Sequences dy = random_sequences(y.data.shape(), y.lengths, rng, -1.0f, 1.0f, 0.5f);
  upload(dy, dyd, ctx.stream());

  Tensor grads[2], dx[2], out[2];
  int64_t allocations = 0;
  for (int run = 0; run < 2; ++run) {
    if (run == 1) allocations = device_allocations();
    params.zero_grads();
    gpu.forward(xd, yd, true);
    gpu.backward(xd, yd, dyd, dxd);
    out[run] = download_tensor(yd.data, ctx);
    dx[run] = download_tensor(dxd.data, ctx);
    params.download_grads(grads[run]);
  }
  EXPECT_EQ(device_allocations(), allocations) << "a warm step allocated device memory";
  expect_close(out[0], out[1], 0, 0, "forward run to run");
  expect_close(dx[0], dx[1], 0, 0, "input gradient run to run");
  expect_close(grads[0], grads[1], 0, 0, "parameter gradients run to run");

  // A smaller batch after the largest one reuses the buffers too.
  const Sequences small = random_sequences({6, 2, 5, 9}, {6, 3}, rng, -1.0f, 1.0f, 1.5f);
  DeviceSequences sd;
  upload(small, sd, ctx.stream());
  const int64_t before = device_allocations();
  gpu.forward(sd, yd, true);
  Sequences ys;
  download(yd, ys, ctx.stream());
  const Sequences dys = random_sequences(ys.data.shape(), ys.lengths, rng, -1.0f, 1.0f, 0.5f);
  upload(dys, dyd, ctx.stream());
  gpu.backward(sd, yd, dyd, dxd);
  ctx.synchronize();
  EXPECT_EQ(device_allocations(), before);
}

TEST(CudaConv2d, DeterministicAndAllocationFreeOnceWarm) {
  DS2_REQUIRE_GPU();
  check_deterministic_and_allocation_free(Precision::kFp32);
  check_deterministic_and_allocation_free(Precision::kBf16);
}

TEST(CudaConv2d, RejectsWrongChannelCount) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  Rng rng(3);
  ParameterStore store;
  Conv2d cpu("conv", store, 2, 3, 3, 3, 1, 1);
  store.finalize();
  store.initialize(rng);
  DeviceParameters params(ctx, store);
  CudaConv2d gpu(ctx, params, cpu);
  DeviceSequences xd, yd;
  upload(random_sequences({4, 2, 6}, {4, 2}, rng), xd, ctx.stream());  // one channel, not two
  EXPECT_THROW(gpu.forward(xd, yd, true), Error);
  upload(random_sequences({4, 2, 3, 6}, {4, 2}, rng), xd, ctx.stream());
  EXPECT_THROW(gpu.forward(xd, yd, true), Error);
}

}  // namespace
}  // namespace ds2
