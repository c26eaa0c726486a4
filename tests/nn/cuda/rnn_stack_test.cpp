// CudaRnnStack (nn/cuda/rnn_stack.h): a stack of unidirectional persistent layers, forward and
// backward, layer after layer and as a wavefront of chunks, against a float64 CPU loop of the same
// stack (projection, bias, clipped-ReLU recurrence, residual; the gradients dx, dW, dU, db from
// the GPU forward's h, so that both use the same masks) and against each other. Fresh random
// inputs, unequal lengths with a 0 and a full one, outputs poisoned with NaN before every pass,
// gradient buffers started at random values (the stack adds to them).
// Shapes: batch 1 to 8, hidden sizes that are not multiples of the tile, chunks of 1 step up to
// longer than T, a first layer narrower than the others (no residual there). bf16: the references
// round W, x and U to bf16 and the state as the tensor-core kernels do; the tolerance is the bf16
// noise level of persistent_rnn_test.cpp, doubled for the layers stacked on one another. Each
// schedule runs three times (launched, captured as a CUDA graph, replayed). The wavefront's chunks
// start with a carry-in GEMM whose summation order differs from the kernel's, so it matches the
// sequential schedule to the same tolerance, not bit for bit.
#include "nn/cuda/rnn_stack.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/device_array.h"
#include "core/error.h"
#include "support/cuda_compare.h"
#include "support/cuda_rnn_reference.h"

namespace ds2 {
namespace {

struct StackCase {
  int layers, input, hidden, batch, steps, chunk;
  Precision precision;
};

std::string case_name(const StackCase& c) {
  return "L" + std::to_string(c.layers) + "_In" + std::to_string(c.input) + "_H" +
         std::to_string(c.hidden) + "_B" + std::to_string(c.batch) + "_T" +
         std::to_string(c.steps) + "_K" + std::to_string(c.chunk) +
         (c.precision == Precision::kBf16 ? "_bf16" : "_fp32");
}

// x {T, B, in} with zero padding frames.
std::vector<float> random_input(int T, int B, int in, const std::vector<int>& len, Rng& rng) {
  std::vector<float> x = random_vector(int64_t{T} * B * in, rng, -1.0f, 1.0f);
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < B; ++b)
      if (t >= len[b]) std::fill_n(x.begin() + (int64_t{t} * B + b) * in, in, 0.0f);
  return x;
}

// The stack in float64 (through cpu_forward for each recurrence).
std::vector<float> cpu_stack(const StackCase& c, const std::vector<float>& x,
                             const std::vector<std::vector<float>>& w,
                             const std::vector<std::vector<float>>& u,
                             const std::vector<std::vector<float>>& bias,
                             const std::vector<int>& len, float clip, bool round_state) {
  const bool bf16 = c.precision == Precision::kBf16;
  const int T = c.steps, B = c.batch, H = c.hidden;
  std::vector<float> in = x;
  for (int l = 0; l < c.layers; ++l) {
    const int width = l == 0 ? c.input : H;
    const std::vector<float> wl = bf16 ? rounded_to_bf16(w[l]) : w[l];
    const std::vector<float> in_r = bf16 ? rounded_to_bf16(in) : in;  // what the GEMM multiplies
    std::vector<float> pre(static_cast<size_t>(T) * B * H);
    for (int64_t r = 0; r < int64_t{T} * B; ++r)
      for (int k = 0; k < H; ++k) {
        double sum = bias[l][k];
        for (int j = 0; j < width; ++j)
          sum += double(in_r[r * width + j]) * wl[int64_t{k} * width + j];
        pre[r * H + k] = static_cast<float>(sum);
      }
    std::vector<float> h = cpu_forward(bf16 ? rounded_to_bf16(u[l]) : u[l], pre.data(), H, len, T,
                                       B, H, /*reverse=*/false, clip, round_state);
    if (width == H)
      for (size_t i = 0; i < h.size(); ++i) h[i] += in[i];
    in = std::move(h);
  }
  return in;
}

// The gradients of the stack in float64, given what the GPU's forward kept (each layer's h and
// input), so that the clip and zero masks are the GPU's: dpre through cpu_backward_data, then
// dx = dpre W (+ g), dW = dpre^T x, dU = sum_t dpre_t^T h_{t-1}, db = sum dpre, with the bf16
// GEMMs' operands rounded as cuBLAS rounds them.
struct StackGrads {
  std::vector<float> dx;
  std::vector<std::vector<float>> dw, du, db;
};

StackGrads cpu_stack_backward(const StackCase& c, const std::vector<std::vector<float>>& inputs,
                              const std::vector<std::vector<float>>& hs,
                              const std::vector<std::vector<float>>& w,
                              const std::vector<std::vector<float>>& u,
                              const std::vector<float>& dy, const std::vector<int>& len, float clip,
                              bool round_state) {
  const bool bf16 = c.precision == Precision::kBf16;
  auto r = [&](const std::vector<float>& v) { return bf16 ? rounded_to_bf16(v) : v; };
  const int T = c.steps, B = c.batch, H = c.hidden;
  const int64_t rows = int64_t{T} * B;
  StackGrads out;
  out.dw.resize(c.layers);
  out.du.resize(c.layers);
  out.db.resize(c.layers);
  std::vector<float> g = dy;
  for (int l = c.layers - 1; l >= 0; --l) {
    const int width = l == 0 ? c.input : H;
    const std::vector<float> dpre =
        cpu_backward_data(r(u[l]), hs[l], g, len, T, B, H, /*reverse=*/false, clip, round_state);
    const std::vector<float> dp = r(dpre), wl = r(w[l]), xl = r(inputs[l]), hl = r(hs[l]);
    std::vector<float> dx(static_cast<size_t>(rows) * width);
    for (int64_t i = 0; i < rows; ++i)
      for (int j = 0; j < width; ++j) {
        double sum = width == H ? g[i * H + j] : 0.0;
        for (int k = 0; k < H; ++k) sum += double(dp[i * H + k]) * wl[int64_t{k} * width + j];
        dx[i * width + j] = static_cast<float>(sum);
      }
    std::vector<double> dw(int64_t{H} * width, 0.0), du(int64_t{H} * H, 0.0), db(H, 0.0);
    for (int64_t i = 0; i < rows; ++i)
      for (int k = 0; k < H; ++k) {
        db[k] += dpre[i * H + k];
        for (int j = 0; j < width; ++j)
          dw[int64_t{k} * width + j] += double(dp[i * H + k]) * xl[i * width + j];
        if (i >= B)
          for (int j = 0; j < H; ++j)
            du[int64_t{k} * H + j] += double(dp[i * H + k]) * hl[(i - B) * H + j];
      }
    out.dw[l].assign(dw.begin(), dw.end());
    out.du[l].assign(du.begin(), du.end());
    out.db[l].assign(db.begin(), db.end());
    g = std::move(dx);
  }
  out.dx = std::move(g);
  return out;
}

// max |got - ref| <= tol * max(1, max |ref|): gradients sum many rounded products, so they are
// compared against their own scale.
void expect_scaled_close(const std::vector<float>& ref, const std::vector<float>& got, double tol,
                         const std::string& what) {
  ASSERT_EQ(ref.size(), got.size()) << what;
  double scale = 1.0, worst = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    scale = std::max(scale, std::fabs(double(ref[i])));
    const double e = std::fabs(double(got[i]) - ref[i]);
    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
  }
  EXPECT_LE(worst, tol * scale) << what << ": max error " << worst << " at scale " << scale;
}

class RnnStackCase : public ::testing::TestWithParam<StackCase> {};

TEST_P(RnnStackCase, ForwardAndBackwardMatchFloat64BothWays) {
  DS2_REQUIRE_GPU();
  const StackCase c = GetParam();
  const int L = c.layers, In = c.input, H = c.hidden, B = c.batch, T = c.steps;
  CudaContext ctx;
  cudaStream_t s = ctx.stream();
  Rng rng(1000 + H + 7 * B + 13 * T);
  const std::vector<int> len = make_lengths(T, B, rng);
  const float clip = 1.5f;  // reached now and then: the clip is part of the contract
  std::vector<std::vector<float>> w, u, bias;
  for (int l = 0; l < L; ++l) {
    const int width = l == 0 ? In : H;
    w.push_back(random_vector(int64_t{H} * width, rng, -1.0f / std::sqrt(float(width)),
                              1.0f / std::sqrt(float(width))));
    u.push_back(random_vector(int64_t{H} * H, rng, -0.7f / std::sqrt(float(H)),
                              0.7f / std::sqrt(float(H))));
    bias.push_back(random_vector(H, rng, -0.2f, 0.2f));
  }
  const std::vector<float> x = random_input(T, B, In, len, rng);

  CudaRnnStack stack(ctx, L, In, H, B, T, c.precision, /*residual=*/true, c.chunk, clip);
  const bool tensor = stack.plan().tiling().state_in_bf16();
  std::vector<DeviceArray<float>> dw(L), du(L), db(L);
  std::vector<RnnStackWeights> weights;
  for (int l = 0; l < L; ++l) {
    to_device(w[l], dw[l], s);
    to_device(u[l], du[l], s);
    to_device(bias[l], db[l], s);
    weights.push_back({dw[l].data(), du[l].data(), db[l].data()});
  }
  DeviceArray<float> dx, y;
  to_device(x, dx, s);
  DeviceArray<int> dlen;
  upload_lengths(len, dlen, s);
  const int64_t n = int64_t{T} * B * H;
  y.reserve(n);

  const std::vector<float> ref = cpu_stack(c, x, w, u, bias, len, clip, tensor);
  const std::vector<float> dy = random_input(T, B, H, len, rng);
  DeviceArray<float> ddy, ddx;
  to_device(dy, ddy, s);
  const int64_t nx = int64_t{T} * B * In;
  ddx.reserve(nx);
  // The gradients are added to what the buffers hold: start them at random values, subtract after.
  std::vector<DeviceArray<float>> gw(L), gu(L), gb(L);
  std::vector<std::vector<float>> start_w, start_u, start_b;
  std::vector<RnnStackGradients> grads;
  for (int l = 0; l < L; ++l) {
    start_w.push_back(random_vector(int64_t{H} * (l == 0 ? In : H), rng, -1.0f, 1.0f));
    start_u.push_back(random_vector(int64_t{H} * H, rng, -1.0f, 1.0f));
    start_b.push_back(random_vector(H, rng, -1.0f, 1.0f));
    gw[l].reserve(static_cast<int64_t>(start_w[l].size()));
    gu[l].reserve(int64_t{H} * H);
    gb[l].reserve(H);
    grads.push_back({gw[l].data(), gu[l].data(), gb[l].data()});
  }
  const auto added = [&](const DeviceArray<float>& g, const std::vector<float>& start) {
    std::vector<float> v = to_host(g.data(), static_cast<int64_t>(start.size()), s);
    for (size_t i = 0; i < v.size(); ++i) v[i] -= start[i];
    return v;
  };
  const double atol = tensor ? 8e-3 : 1e-4, rtol = tensor ? 2e-2 : 1e-4;
  const double gtol = tensor ? 3e-2 : 1e-4;

  std::vector<float> outputs[2];
  for (const bool wavefront : {false, true}) {
    const std::string name = wavefront ? "wavefront" : "layer after layer";
    // Passes 0, 1 and 2: launched from the host, captured as CUDA graphs, replayed.
    for (int pass = 0; pass < 3; ++pass) {
      poison(y.data(), n, ctx);
      poison(ddx.data(), nx, ctx);
      for (int l = 0; l < L; ++l) {
        to_device(start_w[l], gw[l], s);
        to_device(start_u[l], gu[l], s);
        to_device(start_b[l], gb[l], s);
      }
      stack.forward(dx.data(), weights, len, dlen.data(), T, B, wavefront, y.data());
      stack.backward(dx.data(), y.data(), weights, ddy.data(), len, dlen.data(), T, B, wavefront,
                     ddx.data(), grads);
      DS2_CUDA_CHECK(cudaGetLastError());
      outputs[wavefront] = to_host(y.data(), n, s);
      expect_close(ref, outputs[wavefront], name + " vs float64, pass " + std::to_string(pass),
                   atol, rtol);
    }
    // The gradients of the last pass against float64 on that forward's h and layer inputs.
    std::vector<std::vector<float>> hs, inputs = {x};
    for (int l = 0; l < L; ++l) {
      hs.push_back(to_host(stack.hidden_states(l, y.data()), n, s));
      if (l + 1 < L) inputs.push_back(to_host(stack.layer_output(l, y.data()), n, s));
    }
    const StackGrads g = cpu_stack_backward(c, inputs, hs, w, u, dy, len, clip, tensor);
    expect_scaled_close(g.dx, to_host(ddx.data(), nx, s), gtol, name + ": dx");
    for (int l = 0; l < L; ++l) {
      const std::string at = name + ", layer " + std::to_string(l);
      expect_scaled_close(g.dw[l], added(gw[l], start_w[l]), gtol, at + ": dW");
      expect_scaled_close(g.du[l], added(gu[l], start_u[l]), gtol, at + ": dU");
      expect_scaled_close(g.db[l], added(gb[l], start_b[l]), gtol, at + ": db");
    }
  }
  expect_close(outputs[0], outputs[1], "wavefront vs layer after layer", atol, rtol);
}

INSTANTIATE_TEST_SUITE_P(Shapes, RnnStackCase,
                         ::testing::Values(StackCase{3, 128, 128, 1, 7, 3, Precision::kBf16},
                                           StackCase{4, 40, 200, 3, 64, 16, Precision::kBf16},
                                           StackCase{2, 512, 512, 8, 100, 32, Precision::kBf16},
                                           StackCase{5, 96, 96, 4, 33, 1, Precision::kBf16},
                                           StackCase{3, 64, 64, 2, 20, 64, Precision::kBf16},
                                           StackCase{3, 24, 64, 2, 20, 6, Precision::kFp32}),
                         [](const ::testing::TestParamInfo<StackCase>& info) {
                           return case_name(info.param);
                         });

// The wavefront's CUDA graphs depend on the number of chunks and the batch only: batches of other
// lengths with the same number of chunks replay the graph captured for an earlier one, and give
// what the float64 stack gives, forward and backward (dx against float64 on that forward's states:
// bf16 rounding makes two schedules' clipped ReLUs disagree now and then, so they are not compared
// with each other).
TEST(RnnStack, WavefrontGraphsServeEveryLengthWithTheSameNumberOfChunks) {
  DS2_REQUIRE_GPU();
  const int L = 3, H = 64, chunk = 16, max_T = 64, max_B = 3;
  const float clip = 1.5f;
  CudaContext ctx;
  cudaStream_t s = ctx.stream();
  Rng rng(4242);
  CudaRnnStack stack(ctx, L, H, H, max_B, max_T, Precision::kBf16, /*residual=*/true, chunk, clip);
  if (!stack.wavefront_possible()) GTEST_SKIP() << stack.wavefront_why_not();
  const bool tensor = stack.plan().tiling().state_in_bf16();
  std::vector<std::vector<float>> w, u, bias;
  std::vector<DeviceArray<float>> dw(L), du(L), db(L), gw(L), gu(L), gb(L);
  std::vector<RnnStackWeights> weights;
  std::vector<RnnStackGradients> grads;
  for (int l = 0; l < L; ++l) {
    w.push_back(random_vector(int64_t{H} * H, rng, -0.125f, 0.125f));
    u.push_back(random_vector(int64_t{H} * H, rng, -0.08f, 0.08f));
    bias.push_back(random_vector(H, rng, -0.2f, 0.2f));
    to_device(w[l], dw[l], s);
    to_device(u[l], du[l], s);
    to_device(bias[l], db[l], s);
    weights.push_back({dw[l].data(), du[l].data(), db[l].data()});
    gw[l].reserve(int64_t{H} * H);
    gu[l].reserve(int64_t{H} * H);
    gb[l].reserve(H);
    grads.push_back({gw[l].data(), gu[l].data(), gb[l].data()});
  }
  const int64_t most = int64_t{max_T} * max_B * H;
  DeviceArray<float> x, y, dy, dx;
  for (auto* a : {&y, &dx}) a->reserve(most);
  // Three chunks each but for the batch of 2 (its own graphs): first sightings run eagerly, the
  // second T = 45 captures, the rest replay.
  const std::vector<std::pair<int, int>> calls = {{40, 3}, {45, 3}, {48, 2}, {33, 3}, {45, 3}};
  for (const auto& [T, B] : calls) {
    SCOPED_TRACE("T " + std::to_string(T) + " B " + std::to_string(B));
    const std::vector<int> len = make_lengths(T, B, rng);
    const std::vector<float> xh = random_input(T, B, H, len, rng);
    const std::vector<float> dyh = random_input(T, B, H, len, rng);
    to_device(xh, x, s);
    to_device(dyh, dy, s);
    DeviceArray<int> dlen;
    upload_lengths(len, dlen, s);
    const int64_t n = int64_t{T} * B * H;
    poison(y.data(), most, ctx);
    poison(dx.data(), most, ctx);
    stack.forward(x.data(), weights, len, dlen.data(), T, B, /*wavefront=*/true, y.data());
    stack.backward(x.data(), y.data(), weights, dy.data(), len, dlen.data(), T, B, true, dx.data(),
                   grads);
    const StackCase c{L, H, H, B, T, chunk, Precision::kBf16};
    expect_close(cpu_stack(c, xh, w, u, bias, len, clip, tensor), to_host(y.data(), n, s),
                 "wavefront y vs float64", 8e-3, 2e-2);
    std::vector<std::vector<float>> hs, inputs = {xh};
    for (int l = 0; l < L; ++l) {
      hs.push_back(to_host(stack.hidden_states(l, y.data()), n, s));
      if (l + 1 < L) inputs.push_back(to_host(stack.layer_output(l, y.data()), n, s));
    }
    const StackGrads g = cpu_stack_backward(c, inputs, hs, w, u, dyh, len, clip, tensor);
    expect_scaled_close(g.dx, to_host(dx.data(), n, s), 3e-2, "wavefront dx vs float64");
  }
  EXPECT_EQ(stack.wavefront_replays(), 6) << "forward and backward: T 45 (capture), 33, 45";
}

TEST(RnnStack, SaysWhyItRunsLayerAfterLayer) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  CudaRnnStack fp32(ctx, 4, 64, 64, 4, 32, Precision::kFp32, true);
  EXPECT_FALSE(fp32.wavefront_possible());
  EXPECT_NE(fp32.wavefront_why_not().find("cluster"), std::string::npos)
      << fp32.wavefront_why_not();
  EXPECT_EQ(fp32.concurrent_layers(), 1);
  CudaRnnStack one(ctx, 1, 64, 64, 4, 32, Precision::kBf16, true);
  EXPECT_FALSE(one.wavefront_possible());
  CudaRnnStack bf16(ctx, 4, 64, 64, 4, 32, Precision::kBf16, true, 8);
  if (bf16.plan().tiling().cluster) {
    EXPECT_TRUE(bf16.wavefront_possible()) << bf16.wavefront_why_not();
    EXPECT_GE(bf16.concurrent_layers(), 2);
    EXPECT_LE(bf16.concurrent_layers(), 4);
  }
  EXPECT_NE(bf16.describe().find("4 layers of 64"), std::string::npos) << bf16.describe();
  EXPECT_THROW(CudaRnnStack(ctx, 0, 64, 64, 4, 32, Precision::kBf16, true), Error);
  EXPECT_THROW(CudaRnnStack(ctx, 2, 64, 64, 4, 32, Precision::kBf16, true, 0), Error);
}

}  // namespace
}  // namespace ds2
