// The persistent GRU recurrence (nn/cuda/persistent_gru.h) against
//  - a float64 CPU loop of the same recurrence (PyTorch's GRU cell, the contract of
//    kernels/persistent_gru.h), on every case: forward h, candidates and gates, backward-data dpre
//    and dG, with every output poisoned with NaN first (a one-direction launch runs the reverse
//    direction alone and must leave the other direction's NaN columns of the gates untouched);
//  - the CPU RnnLayer and CudaRnnLayer's GEMM recurrence, through CudaRnnLayer on whole layers
//    (forward, dx and every parameter gradient).
// Cases: T 1 to 700, batch 1-5, 7, 8, 12, 13, 16, 32, 64, hidden 33 to 1568 (odd, not multiples of
// the tiles), unequal lengths including 0, both directions, one- and two-direction plans, and both
// passes on tensor cores (the plan's choice where they fit: past batch 4 in batch groups, up to 8
// sets) and on the fp32-math kernel, and batches below a plan's maximum (batch 1-3 through a plan
// for 4, batch 4-15 through one for 16 in 4 groups, some sets then without rows). The tensor-core
// backward-data's scaling of dy by powers of two, and its fp32-math rerun where the scaled
// gradients overflow, bit for bit, in one group and in three.
// Tolerances: fp32 against float64 1e-5 absolute + 1e-4 relative (the GRU's gates are
// contractive: errors do not grow with T); dG and dpre the same.
#include "nn/cuda/persistent_gru.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <iostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/bf16.h"
#include "core/cuda/check.h"
#include "core/cuda/device_array.h"
#include "core/cuda/device_query.h"
#include "kernels/persistent_gru_single.h"
#include "kernels/persistent_rnn_mma.h"
#include "nn/cuda/rnn_layer_cuda.h"
#include "support/cuda_compare.h"
#include "support/cuda_rnn_layer_pair.h"
#include "support/cuda_rnn_reference.h"

namespace ds2 {
namespace {

constexpr double kAtol = 1e-5, kRtol = 1e-4;

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// float64 GRU recurrence of one direction. a: {T, B, P} input side at column offset `off` (3H
// columns). Outputs {T, B, H} h and candidate, {T, B, 3H} gates r, z, n (valid frames only; the
// rest stay as given, so callers pass the poisoned GPU values' positions as NaN and skip them).
struct GruForwardRef {
  std::vector<double> h, cand, gates;
};

// `round_state`: the state multiplied by U rounded to bf16 first (bf16 forwards; pass U rounded).
GruForwardRef cpu_gru_forward(const std::vector<float>& u, const std::vector<float>& bias,
                              const std::vector<float>& a, int P, int off,
                              const std::vector<int>& len, int T, int B, int H, bool reverse,
                              bool round_state = false) {
  GruForwardRef r;
  r.h.assign(size_t(T) * B * H, 0.0);
  r.cand.assign(size_t(T) * B * H, 0.0);
  r.gates.assign(size_t(T) * B * 3 * H, 0.0);
  std::vector<double> g(3 * H), factor(H);
  for (int b = 0; b < B; ++b)
    for (int s = 0; s < T; ++s) {
      const int t = reverse ? T - 1 - s : s, tp = reverse ? t + 1 : t - 1;
      if (t >= len[b]) continue;
      const double* hp = (tp >= 0 && tp < T) ? &r.h[(size_t(tp) * B + b) * H] : nullptr;
      for (int j = 0; hp && j < H; ++j)
        factor[j] = round_state ? bf16_to_float(float_to_bf16(static_cast<float>(hp[j]))) : hp[j];
      for (int i = 0; i < 3 * H; ++i) {
        double acc = 0.0;
        if (hp)
          for (int j = 0; j < H; ++j) acc += double(u[size_t(i) * H + j]) * factor[j];
        g[i] = acc + bias[i];
      }
      const float* ar = &a[(size_t(t) * B + b) * P + off];
      for (int k = 0; k < H; ++k) {
        const double rr = sigmoid(ar[k] + g[k]), z = sigmoid(ar[H + k] + g[H + k]);
        const double n = std::tanh(ar[2 * H + k] + rr * g[2 * H + k]);
        const size_t o = (size_t(t) * B + b) * H + k;
        r.h[o] = (1.0 - z) * n + z * (hp ? hp[k] : 0.0);
        r.cand[o] = g[2 * H + k];
        double* gt = &r.gates[(size_t(t) * B + b) * 3 * H];
        gt[k] = rr;
        gt[H + k] = z;
        gt[2 * H + k] = n;
      }
    }
  return r;
}

// float64 backward-data from the forward's (GPU) r, z, n, candidates and h: dpre and dG {T, B, 3H}.
struct GruBackwardRef {
  std::vector<double> dpre, dg;
};

GruBackwardRef cpu_gru_backward(const std::vector<float>& u, const std::vector<float>& gates, int P,
                                int off, const std::vector<float>& cand,
                                const std::vector<float>& h, const std::vector<float>& dy,
                                const std::vector<int>& len, int T, int B, int H, bool reverse,
                                bool round_grads = false) {
  GruBackwardRef r;
  r.dpre.assign(size_t(T) * B * 3 * H, 0.0);
  r.dg.assign(size_t(T) * B * 3 * H, 0.0);
  std::vector<double> carry(H), next(H);
  for (int b = 0; b < B; ++b) {
    std::fill(carry.begin(), carry.end(), 0.0);
    for (int s = 0; s < T; ++s) {
      const int t = reverse ? s : T - 1 - s, tp = reverse ? t + 1 : t - 1;
      std::fill(next.begin(), next.end(), 0.0);
      if (t < len[b]) {
        const size_t row = size_t(t) * B + b;
        const float* gt = &gates[row * P + off];
        double* dg = &r.dg[row * 3 * H];
        double* dp = &r.dpre[row * 3 * H];
        for (int k = 0; k < H; ++k) {
          const double rr = gt[k], z = gt[H + k], n = gt[2 * H + k];
          const double hp = (tp >= 0 && tp < T) ? h[(size_t(tp) * B + b) * H + k] : 0.0;
          const double dh = dy[row * H + k] + carry[k];
          const double dn = dh * (1 - z) * (1 - n * n), dz = dh * (hp - n) * z * (1 - z);
          const double dr = dn * cand[row * H + k] * rr * (1 - rr);
          dp[k] = dr;
          dp[H + k] = dz;
          dp[2 * H + k] = dn;
          dg[k] = dr;
          dg[H + k] = dz;
          dg[2 * H + k] = dn * rr;
          next[k] = dh * z;
        }
        for (int i = 0; i < 3 * H; ++i) {
          const double gi =
              round_grads ? bf16_to_float(float_to_bf16(static_cast<float>(dg[i]))) : dg[i];
          for (int j = 0; j < H; ++j) next[j] += gi * u[size_t(i) * H + j];
        }
      }
      std::swap(carry, next);
    }
  }
  return r;
}

// got (GPU, rows of `ld` at column `off`, `cols` wide) vs ref {rows, cols}, valid frames only when
// `valid_only` (the kernels leave the gates and candidates of padded frames untouched).
void expect_rows_close(const std::vector<double>& ref, const std::vector<float>& got, int64_t ld,
                       int off, int cols, const std::vector<int>& len, int T, int B,
                       bool valid_only, const std::string& what, double atol = kAtol,
                       double rtol = kRtol) {
  int64_t bad = 0;
  std::string first;
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < B; ++b) {
      if (valid_only && t >= len[b]) continue;
      for (int c = 0; c < cols; ++c) {
        const double r = ref[(size_t(t) * B + b) * cols + c];
        const float g = got[(size_t(t) * B + b) * ld + off + c];
        if (!(std::fabs(g - r) <= atol + rtol * std::fabs(r))) {
          if (bad++ == 0)
            first = "t " + std::to_string(t) + " b " + std::to_string(b) + " col " +
                    std::to_string(c) + ": " + std::to_string(g) + " vs " + std::to_string(r);
        }
      }
    }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " elements off, first " << first;
}

struct Case {
  int T, B, H;
};

// Both directions' U {3H, H} uniform in +-1/sqrt(H) and b_h in [-0.5, 0.5], in that order.
struct GruWeights {
  std::vector<float> u[2], bias[2];
};
GruWeights random_gru_weights(int H, Rng& rng) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(H));
  GruWeights w;
  for (int d = 0; d < 2; ++d) {
    w.u[d] = random_vector(int64_t{3 * H} * H, rng, -scale, scale);
    w.bias[d] = random_vector(3 * H, rng, -0.5f, 0.5f);
  }
  return w;
}

// min_streamed_groups > 0: the fp32-math plans of one and two directions with at least that many
// row groups a CTA streamed from L2 (kernels::PgruPass::streamed_groups) instead. bf16: the plans
// as a bf16 layer would ask for them (a bf16 forward where the fp32 split's does not reach),
// their bf16 forwards checked against float64 given U and the state rounded to bf16.
void check_case(CudaContext& ctx, const Case& c, uint64_t seed, int min_streamed_groups = 0,
                Precision precision = Precision::kFp32) {
  const int T = c.T, B = c.B, H = c.H, GH = 3 * H, P = 2 * GH;
  SCOPED_TRACE("T" + std::to_string(T) + " B" + std::to_string(B) + " H" + std::to_string(H));
  cudaStream_t s = ctx.stream();
  Rng rng(seed);
  const std::vector<int> len = make_lengths(T, B, rng);
  const GruWeights wts = random_gru_weights(H, rng);
  const auto& u = wts.u;
  const auto& bias = wts.bias;
  const std::vector<float> a = random_vector(int64_t{T} * B * P, rng, -1.5f, 1.5f);
  const std::vector<float> dy = random_vector(int64_t{T} * B * H, rng, -1.0f, 1.0f);

  // The passes run on tensor cores where they fit; the fp32-math kernel is checked there too
  // (plan1_fp32).
  const int forced = min_streamed_groups;
  PersistentGruPlan plan1(H, B, 1, -1, precision, true, true, forced),
      plan2(H, B, 2, -1, precision, true, true, forced);
  PersistentGruPlan plan1_fp32(H, B, 1, -1, Precision::kFp32, false);
  // A batch below the plan's maximum (a layer's last, shorter batch): a plan for 4 rows runs B < 4,
  // one for 16 (4 batch groups) runs 4 <= B < 16, one for 32 (bf16: sets of 16 rows from H 768)
  // 16 <= B < 32.
  const int wide_batch = B < 4 ? 4 : B < 16 ? 16 : B < 32 ? 32 : B;
  PersistentGruPlan plan1_wide(H, wide_batch, 1, -1, precision);
  ASSERT_TRUE(plan1.fits()) << plan1.why_not();
  if (forced > 0) {
    ASSERT_GE(plan1.tiling().forward.streamed_groups, forced) << plan1.describe();
    ASSERT_GE(plan1.tiling().backward.streamed_groups, forced) << plan1.describe();
  }
  DeviceArray<float> du[2], dbias[2], dgates_arr, dcand, dh, ddy, ddpre, ddg, ws;
  DeviceArray<int> dlen;
  for (int d = 0; d < 2; ++d) {
    to_device(u[d], du[d], s);
    to_device(bias[d], dbias[d], s);
  }
  to_device(dy, ddy, s);
  upload_lengths(len, dlen, s);
  const int64_t nh = std::max<int64_t>(1, int64_t{T} * B * H);
  for (auto* arr : {&dcand, &dh}) arr->reserve(2 * nh);
  ddpre.reserve(std::max<int64_t>(1, int64_t{T} * B * P));
  ddg.reserve(2 * 3 * nh);
  ws.reserve(
      static_cast<int64_t>(std::max({plan1.workspace_bytes(), plan2.workspace_bytes(),
                                     plan1_fp32.workspace_bytes(), plan1_wide.workspace_bytes()}) /
                               sizeof(float) +
                           1));
  std::vector<const PersistentGruPlan*> plans = {&plan1, &plan2};
  if (forced == 0 && (plan1.forward_on_tensor_cores() || plan1.backward_on_tensor_cores()))
    plans.push_back(&plan1_fp32);
  if (forced == 0 && wide_batch != B && plan1_wide.fits()) plans.push_back(&plan1_wide);
  const size_t ws_bytes = static_cast<size_t>(ws.capacity()) * sizeof(float);

  for (const PersistentGruPlan* plan : plans) {
    if (!plan->fits()) continue;
    const int nd = plan->directions();
    SCOPED_TRACE(
        std::to_string(nd) +
        " direction(s) per launch, batch <= " + std::to_string(plan->max_batch()) + ", forward " +
        (plan->forward_on_tensor_cores() ? "on tensor cores" : "fp32-math") + ", backward-data " +
        (plan->backward_on_tensor_cores() ? "on tensor cores" : "fp32-math"));
    // Single-direction plans run the reverse direction alone, so the forward one's columns of
    // gates and dpre (NaN) must come back untouched.
    const int first = nd == 2 ? 0 : 1;
    if (nd == 2) {
      to_device(a, dgates_arr, s);
    } else {
      std::vector<float> mixed(size_t(T) * B * P, std::nanf(""));
      for (int64_t row = 0; row < int64_t{T} * B; ++row)
        for (int k = 0; k < GH; ++k) mixed[row * P + GH + k] = a[row * P + GH + k];
      to_device(mixed, dgates_arr, s);
    }
    poison(dcand.data(), 2 * nh, ctx);
    poison(dh.data(), 2 * nh, ctx);
    poison(ws.data(), ws.capacity(), ctx);
    kernels::PgruDirection dirs[2];
    for (int d = first; d < 2; ++d) {
      kernels::PgruDirection& p = dirs[d - first];
      p.u = du[d].data();
      p.bias_h = dbias[d].data();
      p.gates = dgates_arr.data() + int64_t{d} * GH;
      p.ld_gates = P;
      p.candidate = dcand.data() + int64_t{d} * nh;
      p.h = dh.data() + int64_t{d} * nh;
      p.reverse = d == 1;
      p.dy = ddy.data();
      p.ld_dy = H;
      p.dpre = ddpre.data() + int64_t{d} * GH;
      p.ld_dpre = P;
      p.dgates = ddg.data() + int64_t{d} * 3 * nh;
    }
    persistent_gru_forward(*plan, dirs, dlen.data(), T, B, ws.data(), ws_bytes, s);
    DS2_CUDA_CHECK(cudaGetLastError());
    const std::vector<float> gates = to_host(dgates_arr.data(), int64_t{T} * B * P, s);
    const std::vector<float> cand_all = to_host(dcand.data(), 2 * nh, s);
    const std::vector<float> h_all = to_host(dh.data(), 2 * nh, s);

    poison(ddpre.data(), int64_t{T} * B * P, ctx);
    poison(ddg.data(), 2 * 3 * nh, ctx);
    poison(ws.data(), ws.capacity(), ctx);
    persistent_gru_backward_data(*plan, dirs, dlen.data(), T, B, ws.data(), ws_bytes, s);
    DS2_CUDA_CHECK(cudaGetLastError());
    const std::vector<float> dpre = to_host(ddpre.data(), int64_t{T} * B * P, s);
    const std::vector<float> dg_all = to_host(ddg.data(), 2 * 3 * nh, s);

    for (int d = first; d < 2; ++d) {
      SCOPED_TRACE(d == 1 ? "reverse direction" : "forward direction");
      const bool reverse = d == 1;
      const std::vector<float> h(h_all.begin() + d * nh,
                                 h_all.begin() + d * nh + int64_t{T} * B * H);
      const std::vector<float> cand(cand_all.begin() + d * nh,
                                    cand_all.begin() + d * nh + int64_t{T} * B * H);
      // bf16 forward: the reference rounds as the kernel does; a state element near a rounding
      // boundary may round the other way from float64's value, hence the wider tolerance.
      const bool bf16 = plan->pass_in_bf16(false);
      // (H200, session 60: up to ~2e-4 on values near 0.1, one rounding step of a state element
      // times its weight, through a few steps.)
      const double atol = bf16 ? 2e-3 : kAtol, rtol = bf16 ? 1e-2 : kRtol;
      const GruForwardRef f = cpu_gru_forward(bf16 ? rounded_to_bf16(u[d]) : u[d], bias[d], a, P,
                                              d * GH, len, T, B, H, reverse, bf16);
      expect_rows_close(f.h, h, H, 0, H, len, T, B, false, "forward h", atol, rtol);
      expect_rows_close(f.cand, cand, H, 0, H, len, T, B, true, "forward candidate", atol, rtol);
      expect_rows_close(f.gates, gates, P, d * GH, GH, len, T, B, true, "forward gates", atol,
                        rtol);
      // Backward-data from the GPU forward's values (as the layer runs it); in bf16 given U and
      // each step's dG rounded, as for the forward.
      const bool bf16_bwd = plan->pass_in_bf16(true);
      const double batol = bf16_bwd ? 2e-3 : kAtol, brtol = bf16_bwd ? 1e-2 : kRtol;
      const GruBackwardRef g =
          cpu_gru_backward(bf16_bwd ? rounded_to_bf16(u[d]) : u[d], gates, P, d * GH, cand, h, dy,
                           len, T, B, H, reverse, bf16_bwd);
      expect_rows_close(g.dpre, dpre, P, d * GH, GH, len, T, B, false, "backward-data dpre", batol,
                        brtol);
      const std::vector<float> dg(dg_all.begin() + d * 3 * nh,
                                  dg_all.begin() + d * 3 * nh + int64_t{T} * B * GH);
      expect_rows_close(g.dg, dg, GH, 0, GH, len, T, B, false, "backward-data dG", batol, brtol);
    }
    if (nd == 1) {
      // The forward direction's columns were not touched.
      int64_t touched = 0;
      for (int64_t row = 0; row < int64_t{T} * B; ++row)
        for (int k = 0; k < GH; ++k) touched += !std::isnan(gates[row * P + k]);
      EXPECT_EQ(touched, 0) << "a one-direction launch wrote the other direction's gates";
    }
  }
}

const Case kCases[] = {
    {1, 1, 37},
    {7, 3, 37},
    {21, 1, 128},
    {20, 4, 128},
    {9, 5, 300},
    {30, 8, 64},
    {5, 32, 200},
    {3, 64, 96},
    {300, 2, 61},
    {40, 4, 1000},
    {16, 1, 1024},
    {12, 3, 1536},
    {6, 4, 1568},
    {4, 8, 1152},
    {700, 1, 33},
    {30, 2, 700},
    {10, 4, 1280},
    {25, 3, 600},
    {50, 1, 515},
    {8, 4, 1312},
    {12, 2, 400},
    {20, 1, 1040},
    {14, 4, 1024},
    {9, 2, 850},
    {33, 1, 171},
    {6, 3, 1001},
    {7, 4, 700},
    {11, 1, 560},
    {9, 4, 1190},
    {5, 2, 1056},
    {15, 16, 192},
    {9, 13, 300},
    {20, 7, 700},
    {11, 32, 128},
    {6, 12, 515},
    // Batch 1-2 to H 384, 3-4 to H 192: the forward on one CTA or a cluster a direction (fp32
    // plans; batch 3-4 also {7, 3, 37} and {20, 4, 128} above).
    {13, 4, 150},
    {31, 3, 192},
    {40, 1, 64},
    {17, 2, 100},
    {70, 1, 256},
    {33, 2, 255},
    {45, 1, 384},
    {19, 2, 384},
    {9, 1, 1},
    {64, 2, 161},
    {21, 2, 320},
};

// Rows streamed from L2 every step (GRU layers past what registers and shared memory hold; batch
// 1-2, the streamed kernels' batch tiles that fit): forced at sizes that fit on chip, 1-2 streamed
// row groups a pass (all of backward-data's at H 37 and 700), one and two directions; then the
// plan's own choice past the on-chip limit (H 1600 at batch 1, H 2048 at batch 2).
TEST(PersistentGru, StreamedRowsMatchFloat64) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  check_case(ctx, {7, 1, 37}, 41, 1);
  check_case(ctx, {20, 1, 300}, 42, 1);
  check_case(ctx, {9, 2, 700}, 43, 2);
  check_case(ctx, {12, 2, 1190}, 44, 1);
  check_case(ctx, {7, 3, 37}, 45, 1);
  check_case(ctx, {9, 7, 700}, 46, 2);
  check_case(ctx, {12, 4, 1190}, 47, 1);
  // On 132 SMs (H100 SXM, H200: where these were measured) both passes of each must stream;
  // other GPUs may hold them on chip or not at all.
  cudaDeviceProp prop{};
  DS2_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  for (const Case& c : {Case{6, 1, 1600}, Case{3, 2, 2048}, Case{3, 4, 2048}}) {
    const PersistentGruPlan p(c.H, c.B);
    std::cout << p.describe() << "\n";
    if (prop.multiProcessorCount == 132)
      ASSERT_TRUE(p.fits() && p.tiling().forward.streamed_groups > 0 &&
                  p.tiling().backward.streamed_groups > 0)
          << p.describe();
    if (!p.fits()) continue;
    check_case(ctx, c, 45 + c.H);
  }
}

// The single-CTA forward (kernels/persistent_gru_single.h) at each instantiation its tilings reach
// (one CTA; clusters of 8 and 16 at each column-group count; batch tiles 1, 2 and 4, the last at
// batch 3 and 4; H 33 and 130 leave a cluster's last CTA without neurons), against float64: h on
// every frame, gates and candidates on the valid ones, and the padded frames' gates left as they
// were; one and two directions in a launch.
TEST(PersistentGru, SingleCtaForwardMatchesFloat64) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  cudaStream_t s = ctx.stream();
  struct SingleCase {
    int T, B, H;
  };
  const SingleCase cases[] = {{3, 1, 2},    {20, 2, 32},  {37, 1, 33},  {20, 2, 64},  {41, 1, 97},
                              {35, 2, 128}, {12, 2, 130}, {33, 1, 137}, {25, 2, 190}, {30, 2, 200},
                              {66, 1, 256}, {5, 2, 257},  {20, 1, 300}, {9, 2, 320},  {34, 1, 383},
                              {17, 4, 31},  {20, 3, 64},  {29, 4, 101}, {8, 3, 129},  {24, 4, 192},
                              {31, 3, 170}, {40, 4, 161}};
  uint64_t seed = 2000;
  int launched = 0;
  for (const SingleCase& c : cases)
    for (int directions : {1, 2}) {
      const int T = c.T, B = c.B, H = c.H, GH = 3 * H, P = 2 * GH;
      SCOPED_TRACE("T" + std::to_string(T) + " B" + std::to_string(B) + " H" + std::to_string(H) +
                   ", " + std::to_string(directions) + " direction(s)");
      const kernels::PgruSingleTiling t = kernels::pgru_single_tiling(H, B, directions);
      ASSERT_NE(kernels::pgru_single_kernel(t), nullptr);
      const kernels::PrnnKernelInfo info = kernels::pgru_single_kernel_info(t);
      ASSERT_EQ(info.local_bytes, 0u) << "spills";
      if (t.ctas_per_direction > 1 && info.max_clusters < directions) continue;  // not resident
      Rng rng(++seed);
      const std::vector<int> len = make_lengths(T, B, rng);
      const GruWeights wts = random_gru_weights(H, rng);
      const auto& u = wts.u;
      const auto& bias = wts.bias;
      const std::vector<float> a = random_vector(int64_t{T} * B * P, rng, -1.5f, 1.5f);
      DeviceArray<float> du[2], dbias[2], dgates, dcand, dh;
      DeviceArray<int> dlen;
      for (int d = 0; d < 2; ++d) {
        to_device(u[d], du[d], s);
        to_device(bias[d], dbias[d], s);
      }
      to_device(a, dgates, s);
      upload_lengths(len, dlen, s);
      const int64_t nh = int64_t{T} * B * H;
      dcand.reserve(2 * nh);
      dh.reserve(2 * nh);
      poison(dcand.data(), 2 * nh, ctx);
      poison(dh.data(), 2 * nh, ctx);
      // One direction: the reverse one alone.
      const int first = directions == 2 ? 0 : 1;
      kernels::PgruDirection dirs[2];
      for (int d = first; d < 2; ++d) {
        kernels::PgruDirection& p = dirs[d - first];
        p.u = du[d].data();
        p.bias_h = dbias[d].data();
        p.gates = dgates.data() + int64_t{d} * GH;
        p.ld_gates = P;
        p.candidate = dcand.data() + d * nh;
        p.h = dh.data() + d * nh;
        p.reverse = d == 1;
      }
      kernels::pgru_single_forward_launch(t, dirs, dlen.data(), T, B, s);
      DS2_CUDA_CHECK(cudaGetLastError());
      const std::vector<float> gates = to_host(dgates.data(), int64_t{T} * B * P, s);
      const std::vector<float> cand_all = to_host(dcand.data(), 2 * nh, s);
      const std::vector<float> h_all = to_host(dh.data(), 2 * nh, s);
      ++launched;
      for (int d = first; d < 2; ++d) {
        SCOPED_TRACE(d == 1 ? "reverse direction" : "forward direction");
        const GruForwardRef f = cpu_gru_forward(u[d], bias[d], a, P, d * GH, len, T, B, H, d == 1);
        const std::vector<float> h(h_all.begin() + d * nh, h_all.begin() + (d + 1) * nh);
        const std::vector<float> cand(cand_all.begin() + d * nh, cand_all.begin() + (d + 1) * nh);
        expect_rows_close(f.h, h, H, 0, H, len, T, B, false, "forward h");
        expect_rows_close(f.cand, cand, H, 0, H, len, T, B, true, "forward candidate");
        expect_rows_close(f.gates, gates, P, d * GH, GH, len, T, B, true, "forward gates");
      }
      // Padded frames' gates, and a one-direction launch's other direction, as they were.
      int64_t changed = 0;
      for (int tt = 0; tt < T; ++tt)
        for (int b = 0; b < B; ++b)
          for (int k = 0; k < P; ++k) {
            const bool written = tt < len[b] && (k >= GH || directions == 2);
            const int64_t at = (int64_t{tt} * B + b) * P + k;
            changed += !written && gates[at] != a[at];
          }
      EXPECT_EQ(changed, 0) << "gates outside the valid frames of the launched directions";
    }
  EXPECT_GT(launched, 0);
}

TEST(PersistentGru, MatchesFloat64Recurrence) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  uint64_t seed = 900;
  for (const Case& c : kCases) check_case(ctx, c, ++seed);
}

// bf16 plans past the fp32 split's batch groups run the passes on tensor cores in sets of 8, 16 or
// 32 batch rows (U, and the state or dG exchanged, rounded to bf16, as the GEMM recurrence on bf16
// operands computes it). On 132 SMs: H 512 batch 32 (one direction, 4 sets), H 1000 batch 16 (2
// sets), H 401 batch 24 (3 sets), both directions of H 400 at batch 16 (2 sets each) and 32 (4 sets
// each: 8 in one launch, backward-data 32 neurons a CTA), H 256 batch 64 (8 sets of one direction),
// H 1280 batch 32 and H 1310 batch 20 (one set of 32 rows, forward on 128 and 131 CTAs of 10
// neurons at 5 and 6 k-tiles a warp), H 1040 batch 64 (two sets of 32 rows, forward on 65 CTAs of
// 16 neurons each at 5 k-tiles), H 1400 batch 5 and H 1700 batch 3 (backward-data at 17 and 20
// k-tiles a warp, sets of 8 rows), H 1800 batch 5 (22, sets of 8), H 1500 batch 12 (18, sets of
// 16), H 1150 batch 20 (14 on 16's kernel, sets of 32), H 1400 batch 24 and H 1536 batch 32 (the
// forward in one set of 32 rows at 16 neurons a CTA, 6 k-tiles a warp), H 1700 batch 12 and H 1877
// batch 16 (plans without the fp32-math kernel: backward-data at 20 and 22 k-tiles in sets of 16),
// H 2048 batch 7 and H 1900 batch 8 (backward-data at 24 and 23 k-tiles on 24's kernel, sets of
// 8), and through plans for a wider batch.
TEST(PersistentGru, Bf16PassesMatchFloat64GivenTheirRounding) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  int bf16_plans = 0;
  for (const Case& c :
       {Case{9, 32, 512},  Case{8, 16, 1000}, Case{5, 24, 401},  Case{6, 16, 400},
        Case{7, 11, 1000}, Case{5, 32, 400},  Case{5, 64, 256},  Case{4, 9, 1024},
        Case{3, 1, 1024},  Case{4, 27, 768},  Case{3, 32, 1024}, Case{3, 64, 512},
        Case{3, 40, 1024}, Case{2, 64, 1000}, Case{4, 6, 1100},  Case{3, 12, 1300},
        Case{3, 24, 1300}, Case{3, 32, 1280}, Case{2, 20, 1310}, Case{2, 64, 1040},
        Case{3, 17, 1100}, Case{3, 5, 1400},  Case{2, 3, 1700},  Case{2, 5, 1800},
        Case{2, 12, 1500}, Case{2, 24, 1400}, Case{2, 20, 1150}, Case{2, 32, 1536},
        Case{2, 12, 1700}, Case{2, 16, 1877}, Case{2, 7, 2048},  Case{2, 8, 1900}}) {
    for (int directions : {1, 2}) {
      const PersistentGruPlan plan(c.H, c.B, directions, -1, Precision::kBf16);
      bf16_plans += plan.pass_in_bf16(false) || plan.pass_in_bf16(true);
    }
    check_case(ctx, c, 900 + c.T + c.B + c.H, 0, Precision::kBf16);
  }
  if (bf16_plans == 0) GTEST_SKIP() << "no bf16 tensor-core pass planned on this GPU";
}

// The tensor-core backward-data exchanges dG times a power of two chosen from the largest |dy|, so
// dy x 2^60 or 2^-60 must give dpre and dG times exactly that, bit for bit (unscaled, fp16 would
// overflow or flush to zero). Where a scaled value does leave fp16's range (U_n doubling the
// gradients every step) or dy holds a NaN, the result must be exactly the fp32-math kernel's. At
// batch 3 in one set of CTAs, at batch 10 in three batch groups (one scale over the whole batch).
// Counts into `checked` where this GPU plans the batch's backward-data on tensor cores.
void check_backward_scaling(CudaContext& ctx, int B, int* checked) {
  SCOPED_TRACE("batch " + std::to_string(B));
  cudaStream_t s = ctx.stream();
  const int H = 515, T = 24, GH = 3 * H;
  const PersistentGruPlan plan(H, B), fp32_math(H, B, 1, -1, Precision::kFp32, false);
  if (!plan.backward_on_tensor_cores()) {
    std::cout << "skipped: this GPU plans no tensor-core backward-data at H " << H << ", batch "
              << B << ": " << plan.describe() << "\n";
    return;
  }
  ++*checked;
  EXPECT_EQ(plan.mma_backward_tiling().batch_groups, (B + 3) / 4);
  ASSERT_FALSE(fp32_math.backward_on_tensor_cores());
  Rng rng(78);
  const std::vector<int> len = make_lengths(T, B, rng);
  const int64_t rows = int64_t{T} * B, n = rows * H;
  // What backward-data reads of the forward: r, z in (0, 1), n in (-1, 1), candidates, h.
  std::vector<float> gates = random_vector(rows * GH, rng, -0.8f, 0.8f);
  for (int64_t r = 0; r < rows; ++r)
    for (int k = 0; k < 2 * H; ++k) gates[r * GH + k] = 0.5f + 0.5f * gates[r * GH + k];
  const std::vector<float> cand = random_vector(n, rng, -1.0f, 1.0f);
  const std::vector<float> h = random_vector(n, rng, -0.9f, 0.9f);
  const std::vector<float> dy = random_vector(n, rng, -1.0f, 1.0f);
  DeviceArray<float> du, dgates_in, dcand, dh, ddy, ddpre, ddg, ws;
  DeviceArray<int> dlen;
  to_device(cand, dcand, s);
  to_device(h, dh, s);
  upload_lengths(len, dlen, s);
  ddpre.reserve(rows * GH);
  ddg.reserve(rows * GH);
  ws.reserve(static_cast<int64_t>(
      std::max(plan.workspace_bytes(), fp32_math.workspace_bytes()) / sizeof(float) + 1));
  const size_t ws_bytes = static_cast<size_t>(ws.capacity()) * sizeof(float);
  // dpre, then dG.
  auto backward = [&](const PersistentGruPlan& p, const std::vector<float>& u,
                      const std::vector<float>& g, const std::vector<float>& x) {
    to_device(u, du, s);
    to_device(g, dgates_in, s);
    to_device(x, ddy, s);
    poison(ddpre.data(), rows * GH, ctx);
    poison(ddg.data(), rows * GH, ctx);
    poison(ws.data(), ws.capacity(), ctx);
    kernels::PgruDirection d;
    d.u = du.data();
    d.gates = dgates_in.data();
    d.ld_gates = GH;
    d.candidate = dcand.data();
    d.h = dh.data();
    d.dy = ddy.data();
    d.ld_dy = H;
    d.dpre = ddpre.data();
    d.ld_dpre = GH;
    d.dgates = ddg.data();
    persistent_gru_backward_data(p, &d, dlen.data(), T, B, ws.data(), ws_bytes, s);
    DS2_CUDA_CHECK(cudaGetLastError());
    std::vector<float> out = to_host(ddpre.data(), rows * GH, s);
    const std::vector<float> dg = to_host(ddg.data(), rows * GH, s);
    out.insert(out.end(), dg.begin(), dg.end());
    return out;
  };
  auto scaled = [](std::vector<float> v, float f) {
    for (float& x : v) x *= f;
    return v;
  };

  const float a = 1.0f / std::sqrt(static_cast<float>(H));
  const std::vector<float> u = random_vector(int64_t{GH} * H, rng, -a, a);
  const std::vector<float> base = backward(plan, u, gates, dy);
  const GruBackwardRef ref = cpu_gru_backward(u, gates, GH, 0, cand, h, dy, len, T, B, H, false);
  const std::vector<float> base_dpre(base.begin(), base.begin() + rows * GH);
  const std::vector<float> base_dg(base.begin() + rows * GH, base.end());
  expect_rows_close(ref.dpre, base_dpre, GH, 0, GH, len, T, B, false, "dpre vs float64");
  expect_rows_close(ref.dg, base_dg, GH, 0, GH, len, T, B, false, "dG vs float64");
  const float big = std::ldexp(1.0f, 60), small = std::ldexp(1.0f, -60);
  expect_bits_equal(scaled(base, big), backward(plan, u, gates, scaled(dy, big)), "dy x 2^60");
  expect_bits_equal(scaled(base, small), backward(plan, u, gates, scaled(dy, small)), "dy x 2^-60");
  const std::vector<float> own = backward(fp32_math, u, gates, dy);
  EXPECT_NE(std::memcmp(own.data(), base.data(), base.size() * sizeof(float)), 0)
      << "the split and the fp32-math kernel summed alike: was the split run at all?";

  // r = 1, z = 0, n = 0: dG = (0, 0, dh), and U_n's entries (uniform +-2 sqrt(3 / H)) double dh
  // every step: 2^24 over the sequence, past fp16's range after the scale's 2^8 of headroom.
  std::vector<float> open_gates(rows * GH, 0.0f);
  for (int64_t r = 0; r < rows; ++r) std::fill_n(&open_gates[r * GH], H, 1.0f);
  const float grow = 2.0f * std::sqrt(3.0f / static_cast<float>(H));
  const std::vector<float> u_grow = random_vector(int64_t{GH} * H, rng, -grow, grow);
  const std::vector<float> grown = backward(fp32_math, u_grow, open_gates, dy);
  EXPECT_GT(*std::max_element(grown.begin(), grown.end()), 1e5f) << "the gradients did not grow";
  expect_bits_equal(grown, backward(plan, u_grow, open_gates, dy), "overflowing gradients");

  // A NaN in dy inside the lengths: as the fp32-math kernel propagates it.
  const int b = static_cast<int>(std::max_element(len.begin(), len.end()) - len.begin());
  std::vector<float> nan_dy = dy;
  nan_dy[(int64_t{len[b] - 1} * B + b) * H + 5] = std::nanf("");
  expect_bits_equal(backward(fp32_math, u, gates, nan_dy), backward(plan, u, gates, nan_dy),
                    "a NaN in dy");
}

TEST(PersistentGru, TensorCoreBackwardDataScalesAndFallsBack) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  int checked = 0;
  for (int batch : {3, 10}) check_backward_scaling(ctx, batch, &checked);
  if (checked == 0) GTEST_SKIP() << "this GPU plans no tensor-core GRU backward-data at H 515";
}

TEST(PersistentGru, PlanFitsDs2SizesAndRefusesWhatItCannotRun) {
  DS2_REQUIRE_GPU();
  PersistentGruPlan plan(1024, 4, 2);
  EXPECT_TRUE(plan.fits()) << plan.why_not();
  EXPECT_NE(plan.describe().find("2 directions in one launch"), std::string::npos)
      << plan.describe();
  // bf16: the forward in bf16 wherever a kernel fits (faster than the fp32 split), backward-data
  // on the split where it reaches and in bf16 past it (H 512 batch 32 on 132 SMs: 4 sets of 8
  // rows, 32 CTAs of 16 neurons each, where the split's 8 sets of 4 leave 16 a set).
  PersistentGruPlan bf16(1024, 4, 1, -1, Precision::kBf16);
  EXPECT_TRUE(bf16.fits() && bf16.pass_in_bf16(false) && !bf16.pass_in_bf16(true) &&
              bf16.backward_on_tensor_cores())
      << bf16.describe();
  cudaDeviceProp prop{};
  DS2_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.multiProcessorCount >= 128) {
    PersistentGruPlan wide(512, 32, 1, -1, Precision::kBf16);
    EXPECT_TRUE(wide.pass_in_bf16(false) && wide.pass_in_bf16(true)) << wide.describe();
    // Backward-data to H 1024 (12 k-tiles a warp, 16 neurons a CTA: 2 sets of 64 CTAs).
    PersistentGruPlan deep(1024, 16, 1, -1, Precision::kBf16);
    EXPECT_TRUE(deep.pass_in_bf16(true)) << deep.describe();
    // Where 8-row sets' CTAs exceed the SMs, sets of 16 rows: H 1024 batch 32 on 2 sets of 64.
    PersistentGruPlan wider(1024, 32, 1, -1, Precision::kBf16);
    for (bool bwd : {false, true}) {
      EXPECT_TRUE(wider.pass_in_bf16(bwd)) << wider.describe();
      const kernels::PrnnTiling& m = bwd ? wider.mma_backward_tiling() : wider.mma_forward_tiling();
      EXPECT_EQ(m.batch_tile, 16);
      EXPECT_EQ(m.ctas(), 128);
    }
    EXPECT_EQ(PersistentGruPlan(512, 32, 1, -1, Precision::kBf16).mma_forward_tiling().batch_tile,
              8);
    // Backward-data past H 1024 (16 k-tiles a warp at H 1300: 82 CTAs of 16 neurons), and the
    // forward there in one set of 16 rows (6 k-tiles a warp).
    const PersistentGruPlan past(1300, 12, 1, -1, Precision::kBf16);
    EXPECT_TRUE(past.pass_in_bf16(false) && past.pass_in_bf16(true)) << past.describe();
    // and of 32 rows: H 1024 batch 64 on 2 sets of 64.
    PersistentGruPlan widest(1024, 64, 1, -1, Precision::kBf16);
    for (bool bwd : {false, true}) {
      EXPECT_TRUE(widest.pass_in_bf16(bwd)) << widest.describe();
      const kernels::PrnnTiling& m =
          bwd ? widest.mma_backward_tiling() : widest.mma_forward_tiling();
      EXPECT_EQ(m.batch_tile, 32);
      EXPECT_EQ(m.ctas(), 128);
    }
    // One set of 32 rows past H 1056: H 1280 batch 32 (the forward 5 k-tiles a warp, 128 CTAs of
    // 10 neurons) and H 1100 batch 24 (backward-data's 13 k-tiles a warp on 16's kernel).
    for (const int h : {1280, 1100}) {
      const PersistentGruPlan wide_h(h, h == 1280 ? 32 : 24, 1, -1, Precision::kBf16);
      for (bool bwd : {false, true}) {
        EXPECT_TRUE(wide_h.pass_in_bf16(bwd)) << wide_h.describe();
        const kernels::PrnnTiling& m =
            bwd ? wide_h.mma_backward_tiling() : wide_h.mma_forward_tiling();
        EXPECT_EQ(m.batch_tile, 32);
        EXPECT_EQ(m.batch_groups, 1);
      }
    }
    // Backward-data past H 1365 (17-22 k-tiles a warp): to H 1877 in sets of 8 and 16 rows; not in
    // sets of 32 (slower than the GEMM recurrence there). Past H 1568 at batch 16 the fp32-math
    // kernel does not fit, and the bf16 plan runs without it.
    for (const int h : {1400, 1536, 1700, 1800, 1877}) {
      for (const int batch : {8, 16}) {
        const PersistentGruPlan deeper(h, batch, 1, -1, Precision::kBf16);
        EXPECT_TRUE(deeper.pass_in_bf16(false) && deeper.pass_in_bf16(true)) << deeper.describe();
      }
    }
    const PersistentGruPlan bf16_only(1700, 16, 1, -1, Precision::kBf16);
    EXPECT_TRUE(bf16_only.fits() && !bf16_only.fp32_math_fits()) << bf16_only.describe();
    EXPECT_NE(bf16_only.describe().find("the fp32-math kernel does not fit"), std::string::npos)
        << bf16_only.describe();
    EXPECT_FALSE(PersistentGruPlan(1700, 16).fits());
    EXPECT_TRUE(PersistentGruPlan(1700, 8, 1, -1, Precision::kBf16).fp32_math_fits());
    EXPECT_FALSE(PersistentGruPlan(1536, 32, 1, -1, Precision::kBf16).pass_in_bf16(true));
    // The forward of H 1321-1536 in one set of 32 rows at 16 neurons a CTA (6 k-tiles a warp).
    for (const int h : {1400, 1536}) {
      const PersistentGruPlan wide(h, 32, 1, -1, Precision::kBf16);
      EXPECT_TRUE(wide.pass_in_bf16(false)) << wide.describe();
      EXPECT_EQ(wide.mma_forward_tiling().batch_tile, 32);
      EXPECT_EQ(wide.mma_forward_tiling().batch_groups, 1);
    }
    // Backward-data of H 1878-2048 (23-24 k-tiles a warp) in sets of 8 rows only.
    for (const int h : {1900, 2048}) {
      EXPECT_TRUE(PersistentGruPlan(h, 8, 1, -1, Precision::kBf16).pass_in_bf16(true)) << "H " << h;
      EXPECT_FALSE(PersistentGruPlan(h, 16, 1, -1, Precision::kBf16).pass_in_bf16(true))
          << "H " << h;
    }
    // At batch 1 the fp32-math backward-data (U on chip) was the faster: it stays.
    const PersistentGruPlan one_row(1400, 1, 1, -1, Precision::kBf16);
    EXPECT_TRUE(one_row.pass_in_bf16(false) && !one_row.backward_on_tensor_cores())
        << one_row.describe();
    EXPECT_FALSE(PersistentGruPlan(512, 32, 1).forward_on_tensor_cores());
  }
  PersistentGruPlan huge(6000, 4, 1);
  EXPECT_FALSE(huge.fits());
  EXPECT_NE(huge.why_not().find("does not fit"), std::string::npos) << huge.why_not();
  // The forward runs on tensor cores where a kernel fits (H 512: 103 CTAs of 5 neurons, or 52 of
  // 10), not past H 1320 (no kernel), not when asked not to.
  for (int batch : {1, 4}) {
    const PersistentGruPlan small(512, batch);
    EXPECT_TRUE(small.forward_on_tensor_cores()) << small.describe();
    EXPECT_NE(small.describe().find("forward on tensor cores"), std::string::npos)
        << small.describe();
  }
  EXPECT_FALSE(PersistentGruPlan(1568, 1).forward_on_tensor_cores());
  EXPECT_FALSE(PersistentGruPlan(512, 1, 1, -1, Precision::kFp32, false).forward_on_tensor_cores());
  // fp32 at batch 1 to H 384, batch 2 to H 320 and batch 3-4 to kPgruSingleMaxHiddenBatchTile4
  // the forward runs on one CTA (to H 32) or a cluster a direction where the device holds them
  // (every GPU with clusters of 16 does); not past those, not past batch 4, not in bf16, not when
  // the tensor cores are declined (the fp32-math kernel is asked for).
  for (const auto& [hidden, batch, directions] :
       {std::tuple{32, 2, 2}, std::tuple{64, 1, 2}, std::tuple{128, 2, 1}, std::tuple{256, 1, 2},
        std::tuple{320, 2, 2}, std::tuple{384, 1, 1}, std::tuple{32, 4, 2}, std::tuple{128, 3, 1},
        std::tuple{kernels::kPgruSingleMaxHiddenBatchTile4, 4, 2}}) {
    const PersistentGruPlan p(hidden, batch, directions);
    const kernels::PgruSingleTiling t = kernels::pgru_single_tiling(hidden, batch, directions);
    const bool resident =
        t.ctas_per_direction == 1 || kernels::pgru_single_kernel_info(t).max_clusters >= directions;
    EXPECT_EQ(p.forward_single_cta(), resident) << p.describe();
    if (!p.forward_single_cta()) continue;
    EXPECT_FALSE(p.forward_on_tensor_cores());
    EXPECT_NE(p.describe().find(t.ctas_per_direction == 1 ? "forward on one CTA a direction"
                                                          : "forward on a cluster of"),
              std::string::npos)
        << p.describe();
  }
  EXPECT_FALSE(PersistentGruPlan(385, 1).forward_single_cta());
  EXPECT_FALSE(PersistentGruPlan(321, 2).forward_single_cta());
  EXPECT_FALSE(
      PersistentGruPlan(kernels::kPgruSingleMaxHiddenBatchTile4 + 1, 4).forward_single_cta());
  EXPECT_FALSE(PersistentGruPlan(128, 5).forward_single_cta());
  EXPECT_FALSE(PersistentGruPlan(128, 1, 1, -1, Precision::kBf16).forward_single_cta());
  EXPECT_FALSE(PersistentGruPlan(128, 1, 1, -1, Precision::kFp32, false).forward_single_cta());
  // Backward-data (K = 3H) on tensor cores at batch <= 4 up to 14 k-tiles a warp: one direction
  // of H 1024 on 128 stacked CTAs of 8 neurons; both directions of H 520 on 65 each, of H 768 on
  // 48 each of 16 neurons (and the forward on 48 of 16), of H 1024 on 64 of 16.
  int device = 0;
  DS2_CUDA_CHECK(cudaGetDevice(&device));
  if (device_attribute(cudaDevAttrMultiProcessorCount, device) >= 130) {
    for (int directions : {1, 2}) {
      const PersistentGruPlan p(directions == 1 ? 1024 : 520, 4, directions);
      EXPECT_TRUE(p.backward_on_tensor_cores()) << p.describe();
      EXPECT_EQ(kernels::pgru_mma_neurons(p.mma_backward_tiling()), 8);
      EXPECT_NE(p.describe().find("backward-data on tensor cores"), std::string::npos)
          << p.describe();
    }
    // One direction past H 1024 (13-14 k-tiles a warp): H 1040 on 130 CTAs of 8 neurons, H 1190
    // on 76 of 16 (1204 owners: 14 of them for the padded tail past 3H).
    for (const auto& [hidden, neurons] : {std::pair{1040, 8}, std::pair{1190, 16}}) {
      const PersistentGruPlan p(hidden, 4);
      EXPECT_TRUE(p.backward_on_tensor_cores()) << p.describe();
      EXPECT_EQ(kernels::pgru_mma_neurons(p.mma_backward_tiling()), neurons);
    }
    for (int hidden : {768, 1024}) {
      const PersistentGruPlan both(hidden, 4, 2);
      EXPECT_TRUE(both.backward_on_tensor_cores()) << both.describe();
      EXPECT_EQ(kernels::pgru_mma_neurons(both.mma_backward_tiling()), 16);
      // The forward: both directions of H 661-1024 on stacked CTAs of 48 rows (16 neurons).
      EXPECT_TRUE(both.forward_on_tensor_cores()) << both.describe();
      EXPECT_EQ(kernels::pgru_mma_neurons(both.mma_forward_tiling()), 16);
    }
    // Both directions of H 1025-1056 (14 k-tiles a warp): backward-data on 66 CTAs of 16 neurons
    // each (the forward past H 1024 keeps the fp32-math kernel).
    const PersistentGruPlan wide(1056, 4, 2);
    EXPECT_TRUE(wide.backward_on_tensor_cores()) << wide.describe();
    EXPECT_EQ(kernels::pgru_mma_neurons(wide.mma_backward_tiling()), 16);
  }
  EXPECT_TRUE(PersistentGruPlan(192, 4, 2).backward_on_tensor_cores());
  // Past batch 4 both passes run in batch groups of at most 4 rows, up to 8 sets: one direction
  // to batch 32, both to 16 (the digits GRU recipe: both directions of H 192 at batch 16).
  for (const auto& [hidden, batch, directions] :
       {std::tuple{512, 5, 1}, std::tuple{128, 32, 1}, std::tuple{192, 16, 2}}) {
    const PersistentGruPlan p(hidden, batch, directions);
    const int groups = (batch + 3) / 4;
    EXPECT_TRUE(p.forward_on_tensor_cores() && p.backward_on_tensor_cores()) << p.describe();
    EXPECT_EQ(p.mma_forward_tiling().batch_groups, groups) << p.describe();
    EXPECT_EQ(p.mma_backward_tiling().batch_groups, groups) << p.describe();
    EXPECT_NE(p.describe().find(std::to_string(groups) + " batch groups a direction"),
              std::string::npos)
        << p.describe();
  }
  for (const auto& [batch, directions] : {std::pair{33, 1}, std::pair{17, 2}}) {
    const PersistentGruPlan p(128, batch, directions);  // 9 or 10 sets
    EXPECT_TRUE(p.fits()) << p.why_not();
    EXPECT_FALSE(p.forward_on_tensor_cores() || p.backward_on_tensor_cores()) << p.describe();
  }
  EXPECT_FALSE(PersistentGruPlan(1200, 1).backward_on_tensor_cores());  // 15 k-tiles a warp
  EXPECT_FALSE(
      PersistentGruPlan(512, 1, 1, -1, Precision::kFp32, false).backward_on_tensor_cores());
  for (int batch : {1, 4, 32}) {
    const int best = PersistentGruPlan::max_hidden(batch);
    std::cout << "largest persistent GRU layer at batch " << batch << ": " << best << "\n";
    EXPECT_GE(best, 1024);
    EXPECT_FALSE(PersistentGruPlan(best + 512, batch, 1, -1, Precision::kFp32, true, false).fits());
  }
}

// Whole GRU layers: CudaRnnLayer with the persistent recurrence vs the CPU RnnLayer and vs the
// GEMM recurrence (forward; backward of both GPU recurrences from the same forward states).
void check_layer(CudaContext& ctx, bool bidirectional, bool batch_norm, int H, const Shape& shape,
                 const std::vector<int>& lengths, uint64_t seed,
                 const std::string& path = "persistent GRU") {
  SCOPED_TRACE(std::string(bidirectional ? "bi" : "uni") + (batch_norm ? " bn" : "") + " H" +
               std::to_string(H) + " " + shape_str(shape));
  Rng rng(seed);
  const int T = static_cast<int>(shape[0]), B = static_cast<int>(shape[1]);
  ParameterStore store;
  RnnLayer cpu("gru", store, static_cast<int>(shape[2]), H, RnnType::kGru, bidirectional,
               batch_norm, 20.0f, 0.1f);
  store.finalize();
  store.initialize(rng);
  DeviceParameters params_gemm(ctx, store), params(ctx, store);
  store.zero_grads();
  const Sequences x = random_sequences(shape, lengths, rng);
  const Sequences dy = random_sequences({T, B, H}, lengths, rng);
  Sequences y_ref, dx_ref;
  cpu.forward(x, y_ref, true);
  cpu.backward(x, y_ref, dy, dx_ref);

  DeviceSequences xd, dyd, yd, yd_gemm, dxd;
  upload(x, xd, ctx.stream());
  upload(dy, dyd, ctx.stream());
  {
    CudaRnnLayer gemm_layer(ctx, params_gemm, cpu);
    gemm_layer.set_use_persistent(false);
    yd_gemm.data.resize({T, B, H});
    poison(yd_gemm.data, ctx);
    gemm_layer.forward(xd, yd_gemm, true);
    EXPECT_FALSE(gemm_layer.ran_persistent());
  }
  CudaRnnLayer gpu(ctx, params, cpu);
  yd.data.resize({T, B, H});
  poison(yd.data, ctx);
  gpu.forward(xd, yd, true);
  EXPECT_TRUE(gpu.ran_persistent()) << gpu.recurrence_path();
  EXPECT_NE(gpu.recurrence_path().find(path), std::string::npos) << gpu.recurrence_path();
  const Tensor y = download_tensor(yd.data, ctx);
  ds2::expect_close(y_ref.data, y, 2e-5, 1e-4, "persistent GRU layer forward vs CPU");
  ds2::expect_close(download_tensor(yd_gemm.data, ctx), y, 1e-5, 1e-4,
                    "persistent vs GEMM GRU layer forward");
  EXPECT_EQ(nonzero_padding(y, lengths), 0);

  Tensor dx[2], grads[2];
  // Backward twice from the one persistent forward's gates and states: neither backward may
  // change them, or the second (GEMM) one would disagree.
  for (int persistent = 1; persistent >= 0; --persistent) {
    gpu.set_use_persistent(persistent == 1);
    params.zero_grads();
    dxd.data.resize(shape);
    poison(dxd.data, ctx);
    gpu.backward(xd, yd, dyd, dxd);
    EXPECT_EQ(gpu.ran_persistent(), persistent == 1);
    dx[persistent] = download_tensor(dxd.data, ctx);
    params.download_grads(grads[persistent]);
  }
  ds2::expect_close(dx[0], dx[1], 1e-5, 1e-4, "persistent vs GEMM GRU layer dx");
  ds2::expect_close(dx_ref.data, dx[1], 1e-4, 1e-3, "persistent GRU layer dx vs CPU");
  EXPECT_EQ(nonzero_padding(dx[1], lengths), 0);
  for (const ParamEntry& e : store.parameters()) {
    ds2::expect_close(grads[0].data() + e.offset, grads[1].data() + e.offset, e.numel, 1e-4, 1e-3,
                      "persistent vs GEMM GRU layer grad " + e.name);
    ds2::expect_close(store.grads().data() + e.offset, grads[1].data() + e.offset, e.numel, 1e-4,
                      1e-3, "persistent GRU layer grad " + e.name + " vs CPU");
  }
}

TEST(PersistentGru, LayerMatchesCpuAndGemmRecurrence) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  uint64_t seed = 70;
  for (bool bi : {false, true})
    for (bool bn : {false, true}) {
      check_layer(ctx, bi, bn, 37, {9, 4, 13}, {9, 0, 5, 3}, ++seed);
      check_layer(ctx, bi, bn, 256, {20, 8, 33}, {20, 3, 0, 19, 20, 7, 1, 12}, ++seed);
    }
  check_layer(ctx, true, true, 1024, {30, 4, 40}, {30, 25, 0, 29}, ++seed);
  // The digits GRU recipe's layer (both directions of H 192 at batch 16: 4 batch groups each).
  check_layer(ctx, true, true, 192, {15, 16, 20},
              {15, 3, 0, 14, 15, 7, 1, 12, 9, 15, 11, 2, 15, 6, 10, 13}, ++seed);
}

// A bidirectional GRU layer runs a pass's directions one after the other where the two-direction
// plan's pass left the tensor cores and the one-direction plan's did not, the backward-data from
// batch 3 (directions_in_turn_faster); elsewhere in one launch. The passes may differ.
TEST(PersistentGru, BidirectionalLayersRunInTurnWhereOneLaunchIsSlower) {
  DS2_REQUIRE_GPU();
  cudaDeviceProp prop{};
  DS2_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  // The cases are such layers on 132 SMs (H100, H200; session 56's sweep): there each must be one.
  const bool h100_sized = prop.multiProcessorCount == 132 && prop.regsPerMultiprocessor == 65536;
  // Whether the pass leaves the tensor cores in one launch and keeps them one direction at a time.
  const auto such = [](const PersistentGruPlan& both, const PersistentGruPlan& one, bool backward) {
    if (!both.fits() || !one.fits()) return false;
    return backward ? !both.backward_on_tensor_cores() && one.backward_on_tensor_cores()
                    : !both.forward_on_tensor_cores() && one.forward_on_tensor_cores();
  };
  int checked = 0;
  struct Case {
    int hidden, batch;
    bool forward_in_turn, backward_in_turn;
  };
  for (const Case& c :
       {Case{256, 32, true, true}, Case{512, 16, true, true}, Case{1024, 8, true, true},
        Case{1152, 4, true, true}, Case{1152, 3, true, true}, Case{1152, 1, true, false},
        Case{1152, 2, true, false}}) {
    SCOPED_TRACE("H " + std::to_string(c.hidden) + " batch " + std::to_string(c.batch));
    const PersistentGruPlan both(c.hidden, c.batch, 2), one(c.hidden, c.batch, 1);
    const bool is_such = such(both, one, false) && such(both, one, true);
    if (h100_sized) EXPECT_TRUE(is_such) << both.describe() << "\n" << one.describe();
    if (!is_such) continue;  // fewer or smaller SMs may fit neither form of the case
    ++checked;
    EXPECT_EQ(directions_in_turn_faster(both, one, false), c.forward_in_turn);
    EXPECT_EQ(directions_in_turn_faster(both, one, true), c.backward_in_turn);
  }
  // Plans both on tensor cores (H 256 batch 16) or both off them (H 1024 batch 32) stay in one
  // launch.
  for (const auto& [hidden, batch] : {std::pair{256, 16}, std::pair{1024, 32}}) {
    SCOPED_TRACE("H " + std::to_string(hidden) + " batch " + std::to_string(batch));
    const PersistentGruPlan both(hidden, batch, 2), one(hidden, batch, 1);
    if (!both.fits() || !one.fits()) continue;
    EXPECT_FALSE(directions_in_turn_faster(both, one, false));
    EXPECT_FALSE(directions_in_turn_faster(both, one, true));
  }
  if (checked == 0) GTEST_SKIP() << "no case has a two-direction plan off the tensor cores here";
  CudaContext ctx;
  check_layer(ctx, true, false, 512, {12, 16, 20},
              {12, 3, 0, 11, 12, 7, 1, 12, 9, 12, 11, 2, 12, 6, 10, 5}, 90,
              "persistent recurrence, one direction after the other");
  // The passes apart: the forward in turn, the backward-data in one launch.
  const PersistentGruPlan both(1152, 1, 2), one(1152, 1, 1);
  if (such(both, one, false) && !directions_in_turn_faster(both, one, true))
    check_layer(ctx, true, true, 1152, {14, 1, 24}, {14}, 91,
                "forward one direction after the other, backward-data in one launch");
}

// GRU layers whose persistent passes are off the tensor cores take the GEMM recurrence past a
// batch, and say so: bf16 past batch 8 (on bf16 operands, 2-2.5x faster there on an H200, session
// 58), fp32 past batch 40 at this H (session 66). At batch 4 in bf16 (on the plan for 48, which has
// no bf16 pass) and at batch 40 in fp32 the persistent recurrence stays.
TEST(PersistentGru, LayersOffTheTensorCoresTakeTheGemmRecurrencePastTheirBatch) {
  DS2_REQUIRE_GPU();
  // H 1280 batch 48: the bf16 passes' sets exceed 132 SMs too (two sets of 32 rows, at least 80
  // CTAs a set).
  const int H = 1280, in = 16, T = 6, big = 48;
  const PersistentGruPlan bf16(H, big, 1, -1, Precision::kBf16);
  if (!bf16.fits() || bf16.forward_on_tensor_cores() || bf16.backward_on_tensor_cores())
    GTEST_SKIP() << "H 1280 batch 48 is not an fp32-math plan here: " << bf16.describe();
  CudaContext ctx;
  Rng rng(58);
  RnnLayerPair layer(ctx, rng, "gru", in, H, RnnType::kGru, /*bidirectional=*/false);
  CudaRnnLayer& gpu = layer.gpu;
  auto run = [&](int batch, Precision precision) {
    ctx.set_matmul_precision(precision);
    DeviceSequences xd, yd;
    upload(random_sequences({T, batch, in}, std::vector<int>(batch, T), rng), xd, ctx.stream());
    yd.data.resize({T, batch, H});
    gpu.forward(xd, yd, true);
    DS2_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  };
  run(big, Precision::kBf16);
  EXPECT_FALSE(gpu.ran_persistent());
  EXPECT_NE(gpu.recurrence_path().find(
                "GEMM recurrence (bf16 at batch 48 with the persistent GRU's forward and "
                "backward-data"),
            std::string::npos)
      << gpu.recurrence_path();
  run(4, Precision::kBf16);
  EXPECT_TRUE(gpu.ran_persistent()) << gpu.recurrence_path();
  EXPECT_NE(gpu.recurrence_path().find("keeps fp32 weights"), std::string::npos)
      << gpu.recurrence_path();
  // fp32 (the fp16 split's batch groups end at 32 rows): past batch 40 at this H.
  run(big, Precision::kFp32);
  EXPECT_FALSE(gpu.ran_persistent());
  EXPECT_NE(gpu.recurrence_path().find(
                "GEMM recurrence (fp32 at batch 48 with the persistent GRU's forward and "
                "backward-data off the tensor cores: the GEMM recurrence is faster)"),
            std::string::npos)
      << gpu.recurrence_path();
  run(40, Precision::kFp32);
  EXPECT_TRUE(gpu.ran_persistent()) << gpu.recurrence_path();
}

// One training forward and backward of `gpu` on random frames (T of them for each of `batch`
// rows), finished; whether the forward ran persistent (ran_persistent() then tells of backward).
bool forward_and_backward(CudaContext& ctx, CudaRnnLayer& gpu, Rng& rng, int T, int batch, int in,
                          int H) {
  DeviceSequences xd, yd, dyd, dxd;
  upload(random_sequences({T, batch, in}, std::vector<int>(batch, T), rng), xd, ctx.stream());
  upload(random_sequences({T, batch, H}, std::vector<int>(batch, T), rng), dyd, ctx.stream());
  yd.data.resize({T, batch, H});
  gpu.forward(xd, yd, true);
  const bool forward_persistent = gpu.ran_persistent();
  gpu.backward(xd, yd, dyd, dxd);
  DS2_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  return forward_persistent;
}

// A fresh bidirectional bf16 GRU layer of H through one training step at `batch` (ctx in bf16):
// which of its passes ran persistent.
void expect_bidirectional_bf16_gru(CudaContext& ctx, Rng& rng, int H, int batch,
                                   bool forward_persistent, bool backward_persistent) {
  SCOPED_TRACE("H " + std::to_string(H) + " batch " + std::to_string(batch));
  const int in = 16, T = 5;
  RnnLayerPair layer(ctx, rng, "gru", in, H, RnnType::kGru, /*bidirectional=*/true);
  EXPECT_EQ(forward_and_backward(ctx, layer.gpu, rng, T, batch, in, H), forward_persistent)
      << layer.gpu.recurrence_path();
  EXPECT_EQ(layer.gpu.ran_persistent(), backward_persistent) << layer.gpu.recurrence_path();
}

// Bidirectional bf16 GRU layers whose passes run their directions one after the other take the
// GEMM recurrence past 24 batch rows a set (H 1280: one set of 32 rows at batch 32 and 25), and
// stay persistent up to it (batch 24); also where H is not a multiple of 8 (H 1100 batch 32), on
// the GEMM recurrence's padded dimensions.
TEST(PersistentGru, Bf16DirectionsInTurnPast24RowsASetTakeTheGemmRecurrence) {
  DS2_REQUIRE_GPU();
  const int H = 1280, in = 16, T = 5;
  const PersistentGruPlan both(H, 32, 2, -1, Precision::kBf16), one(H, 32, 1, -1, Precision::kBf16);
  if (both.fits() || !one.pass_in_bf16(false) || !one.pass_in_bf16(true) ||
      one.mma_forward_tiling().batch_groups != 1)
    GTEST_SKIP() << "H 1280 batch 32 does not run in turn in one set of bf16 rows here: "
                 << one.describe();
  CudaContext ctx;
  ctx.set_matmul_precision(Precision::kBf16);
  Rng rng(62);
  RnnLayerPair layer(ctx, rng, "gru", in, H, RnnType::kGru, /*bidirectional=*/true);
  CudaRnnLayer& gpu = layer.gpu;
  for (const int batch : {32, 24, 25}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const bool forward_persistent = forward_and_backward(ctx, gpu, rng, T, batch, in, H);
    EXPECT_EQ(forward_persistent, batch <= 24) << gpu.recurrence_path();
    EXPECT_EQ(gpu.ran_persistent(), batch <= 24) << gpu.recurrence_path();
    if (batch > 24)
      EXPECT_NE(gpu.recurrence_path().find(
                    "GEMM recurrence (bf16 at batch " + std::to_string(batch) +
                    " with the persistent GRU's forward and backward-data one direction after "
                    "the other in sets of " +
                    std::to_string(batch) + " batch rows"),
                std::string::npos)
          << gpu.recurrence_path();
  }
  const PersistentGruPlan unaligned(1100, 32, 1, -1, Precision::kBf16);
  if (!unaligned.pass_in_bf16(false) || !unaligned.pass_in_bf16(true)) {
    std::cout << "skipped H 1100 batch 32: " << unaligned.describe() << "\n";
    return;
  }
  expect_bidirectional_bf16_gru(ctx, rng, 1100, 32, /*forward_persistent=*/false,
                                /*backward_persistent=*/false);
}

// Backward-data past H 1365 that would run in turn takes the GEMM recurrence in sets of more than
// 8 rows (H 1400: sets of 16 rows, 12 of them filled, at batch 12), its forward staying
// persistent; in sets of 8 (batch 8) both passes are persistent. Past H 1536 in sets of 16 alike,
// where H is a multiple of 8 (H 1600 batch 16) or not (H 1700).
TEST(PersistentGru, Bf16BackwardDataInTurnPastH1365BeyondSetsOf8TakesTheGemmRecurrence) {
  DS2_REQUIRE_GPU();
  const int H = 1400, in = 16, T = 5;
  const PersistentGruPlan one(H, 12, 1, -1, Precision::kBf16);
  if (PersistentGruPlan(H, 12, 2, -1, Precision::kBf16).fits() || !one.pass_in_bf16(false) ||
      !one.pass_in_bf16(true) || one.mma_backward_tiling().batch_tile != 16)
    GTEST_SKIP() << "H 1400 batch 12 does not run in turn in sets of 16 bf16 rows here: "
                 << one.describe();
  CudaContext ctx;
  ctx.set_matmul_precision(Precision::kBf16);
  Rng rng(63);
  RnnLayerPair layer(ctx, rng, "gru", in, H, RnnType::kGru, /*bidirectional=*/true);
  CudaRnnLayer& gpu = layer.gpu;
  for (const int batch : {12, 8}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    EXPECT_TRUE(forward_and_backward(ctx, gpu, rng, T, batch, in, H)) << gpu.recurrence_path();
    EXPECT_EQ(gpu.ran_persistent(), batch == 8) << gpu.recurrence_path();
    EXPECT_EQ(
        gpu.recurrence_path().find("backward-data on the GEMM recurrence (bf16 at batch 12 "
                                   "with the persistent GRU's backward-data one direction "
                                   "after the other in sets of 12 batch rows") != std::string::npos,
        batch == 12)
        << gpu.recurrence_path();
  }
  const PersistentGruPlan wide_one(1700, 16, 1, -1, Precision::kBf16);
  if (!wide_one.pass_in_bf16(false) || !wide_one.pass_in_bf16(true)) {
    std::cout << "skipped H 1700 batch 16: " << wide_one.describe() << "\n";
    return;
  }
  for (const int wide : {1700, 1600})
    expect_bidirectional_bf16_gru(ctx, rng, wide, 16, /*forward_persistent=*/true,
                                  /*backward_persistent=*/false);
}

// bf16 layers past the fp32 split's batch groups run both passes on bf16 tensor cores (H 512 at
// batch 24 and 12 on 132 SMs; at 12 backward-data may take the split instead). The GEMM recurrence
// rounds U and every state and dG as the bf16 passes do, so whole layers on it are the reference.
// Where a pass is off the tensor cores past its batch, it runs the GEMM recurrence, the other pass
// persistent: backward() then rounds U itself, and dU's states from the persistent forward's.
// A bf16 layer of H (batches: the first its largest) on its persistent passes against the same
// layer on the GEMM recurrence, whose tolerances were measured on an H200 (session 60).
void expect_bf16_layer_matches_gemm(int H, bool bidirectional, std::initializer_list<int> batches,
                                    uint64_t seed) {
  const int in = 24, T = 9;
  CudaContext ctx;
  ctx.set_matmul_precision(Precision::kBf16);
  Rng rng(seed);
  RnnLayerPair layer(ctx, rng, "gru", in, H, RnnType::kGru, bidirectional);
  CudaRnnLayer& gpu = layer.gpu;
  DeviceParameters& params = layer.params;
  for (const int B : batches) {
    SCOPED_TRACE("H " + std::to_string(H) + " batch " + std::to_string(B));
    std::vector<int> lengths(B, T);
    for (int b = 0; b < B; ++b) lengths[b] = b % 5 == 3 ? 0 : T - (b * 7) % T;
    DeviceSequences xd, yd, dyd, dxd;
    upload(random_sequences({T, B, in}, lengths, rng), xd, ctx.stream());
    upload(random_sequences({T, B, H}, lengths, rng), dyd, ctx.stream());
    struct Result {
      Tensor y, dx, grads;
    };
    auto run = [&](bool persistent) {
      gpu.set_use_persistent(persistent);
      params.zero_grads();
      yd.data.resize({T, B, H});
      poison(yd.data, ctx);
      gpu.forward(xd, yd, true);
      EXPECT_EQ(gpu.ran_persistent(), persistent) << gpu.recurrence_path();
      gpu.backward(xd, yd, dyd, dxd);
      EXPECT_EQ(gpu.ran_persistent(), persistent) << gpu.recurrence_path();
      Result r{download_tensor(yd.data, ctx), download_tensor(dxd.data, ctx), Tensor()};
      params.download_grads(r.grads);
      return r;
    };
    const Result ours = run(true);
    EXPECT_NE(gpu.recurrence_path().find("in bf16"), std::string::npos) << gpu.recurrence_path();
    const Result gemm = run(false);
    const double y_error = relative_error(gemm.y.data(), ours.y.data(), gemm.y.numel());
    const double dx_error = relative_error(gemm.dx.data(), ours.dx.data(), gemm.dx.numel());
    const double grad_error =
        relative_error(gemm.grads.data(), ours.grads.data(), gemm.grads.numel());
    EXPECT_LT(y_error, 1e-2);
    EXPECT_LT(dx_error, 3e-2);
    EXPECT_LT(grad_error, 3e-2);
    std::cout << "H " << H << " batch " << B << " against the GEMM recurrence, relative error: y "
              << y_error << ", dx " << dx_error << ", gradients " << grad_error << "\n";
  }
}

TEST(PersistentGru, Bf16LayersOnTensorCoresMatchTheGemmRecurrence) {
  DS2_REQUIRE_GPU();
  const PersistentGruPlan plan(512, 24, 1, -1, Precision::kBf16);
  if (!plan.fits() || !plan.pass_in_bf16(false) || !plan.pass_in_bf16(true))
    GTEST_SKIP() << "H 512 batch 24 has no bf16 tensor-core passes here: " << plan.describe();
  expect_bf16_layer_matches_gemm(512, /*bidirectional=*/true, {24, 12}, 60);
}

// Past H 1568 at batch 9-16 the fp32-math kernel does not fit; a bf16 layer runs both passes on
// bf16 tensor cores without it (one direction here; bidirectional layers' passes in turn are
// Bf16BackwardDataInTurn...'s).
TEST(PersistentGru, Bf16LayersWhereTheFp32KernelDoesNotFitRunOnTensorCores) {
  DS2_REQUIRE_GPU();
  const PersistentGruPlan plan(1700, 16, 1, -1, Precision::kBf16);
  if (!plan.fits() || plan.fp32_math_fits())
    GTEST_SKIP() << "H 1700 batch 16 is not a bf16 plan without the fp32-math kernel here: "
                 << plan.describe();
  expect_bf16_layer_matches_gemm(1700, /*bidirectional=*/false, {16, 12}, 63);
}

}  // namespace
}  // namespace ds2
