// The persistent clipped-ReLU recurrence (nn/cuda/persistent_rnn.h) against
//  - the GEMM recurrence of CudaRnnLayer (per step cuBLAS GEMM + kernels/rnn.h, rebuilt here step
//    for step as run_direction / backprop_direction do it), on every case;
//  - a float64 CPU loop of the same recurrence, on the cases small enough for the host;
//  - the CPU RnnLayer, through CudaRnnLayer (persistent by default) on whole layers.
// Cases cover T in {1, 7, 64, 300}, batch {1, 3, 4, 8, 16, 32}, hidden {37, 128, 1000, 1152} and
// 1600-2900 (the fp32-math kernel's threads then own 8 columns), most not multiples of the tiles,
// unequal lengths including 0, both directions, one-direction plans and
// the two-directions-in-one-launch plan. Outputs and the workspace are poisoned with NaN first.
// Backward-data of both implementations reads the same h, so the clip/zero masks agree exactly.
// Tolerances: forward and backward-data 1e-5 relative + 1e-5 absolute (fp32 summation order;
// U ~ U(-1/sqrt(H), 1/sqrt(H)) keeps the recurrence contractive, so errors do not grow with T).
// bf16 plans are checked the same way against references given U rounded to bf16 (the kernel's
// contract): fp32-math plans to the same tolerance, which checks the rounding itself; tensor-core
// plans (the state rounded to bf16 too) against references that round the state the same way,
// to 4e-3 absolute + 1e-2 relative. That tolerance is the bf16 noise level, not slack: a state
// on a rounding boundary rounds either way under another summation order, the next step moves by
// ~2^-9 |h| |U|, more states cross boundaries, and two such trajectories settle about one
// rounding noise apart (~3e-4 rms, 2e-3 at most over 300 steps at H 1152, measured on an H200).
#include "nn/cuda/persistent_rnn.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/bf16.h"
#include "core/cuda/check.h"
#include "core/cuda/device_array.h"
#include "core/cuda/gemm.h"
#include "kernels/persistent_rnn_mma.h"
#include "kernels/rnn.h"
#include "nn/cuda/rnn_layer_cuda.h"
#include "support/cuda_compare.h"
#include "support/cuda_rnn_layer_pair.h"
#include "support/cuda_rnn_reference.h"

namespace ds2 {
namespace {

constexpr double kAtol = 1e-5, kRtol = 1e-5;
constexpr double kTensorAtol = 4e-3, kTensorRtol = 1e-2;

unsigned int float_bits(float v) {
  unsigned int bits = 0;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits;
}
float bits_float(unsigned int bits) {
  float v = 0.0f;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

struct Case {
  int T, B, H;
  Precision precision = Precision::kFp32;
};

std::string case_name(const Case& c) {
  return "T" + std::to_string(c.T) + "_B" + std::to_string(c.B) + "_H" + std::to_string(c.H) +
         (c.precision == Precision::kBf16 ? "_bf16" : "");
}

// One case, both directions: persistent (one-direction plans, and the two-direction plan when it
// fits) vs the GEMM recurrence, and vs float64 when `with_cpu`.
void check_case(CudaContext& ctx, const Case& c, uint64_t seed, bool with_cpu) {
  SCOPED_TRACE(case_name(c));
  const int T = c.T, B = c.B, H = c.H, P = 2 * H;
  const float clip = 0.8f;  // visited often (h from pre in [-1, 1] plus U h)
  cudaStream_t s = ctx.stream();
  Rng rng(seed);
  const std::vector<int> len = make_lengths(T, B, rng);
  const float a = 1.0f / std::sqrt(static_cast<float>(H));
  std::vector<float> u[2] = {random_vector(int64_t{H} * H, rng, -a, a),
                             random_vector(int64_t{H} * H, rng, -a, a)};
  // What the references multiply by: U itself, or U as a bf16 plan holds it.
  const bool bf16 = c.precision == Precision::kBf16;
  const std::vector<float> u_ref[2] = {bf16 ? rounded_to_bf16(u[0]) : u[0],
                                       bf16 ? rounded_to_bf16(u[1]) : u[1]};
  const std::vector<float> pre = random_vector(int64_t{T} * B * P, rng, -1.0f, 1.0f);
  const std::vector<float> dy = random_vector(int64_t{T} * B * H, rng, -1.0f, 1.0f);

  DeviceArray<float> du[2], du_ref[2], dpre_in, ddy, zero, hp[2], hg, dpre_p, dpre_g, ws;
  DeviceArray<int> dlen;
  for (int d = 0; d < 2; ++d) {
    to_device(u[d], du[d], s);
    to_device(u_ref[d], du_ref[d], s);
  }
  to_device(pre, dpre_in, s);
  to_device(dy, ddy, s);
  upload_lengths(len, dlen, s);
  const int64_t nh = std::max<int64_t>(1, int64_t{T} * B * H), np = std::max<int64_t>(1, nh * 2);
  for (auto* arr : {&hp[0], &hp[1], &hg}) arr->reserve(nh);
  dpre_p.reserve(np);
  dpre_g.reserve(np);
  zero.reserve(std::max(1, B * H));
  kernels::fill(zero.data(), int64_t{B} * H, 0.0f, s);

  PersistentRnnPlan plan(H, B, 1, -1, c.precision);
  ASSERT_TRUE(plan.fits()) << plan.why_not();
  PersistentRnnPlan plan2(H, B, 2, -1, c.precision);
  // Tensor-core plans round the state as well: so do both references, given round_state.
  const bool tensor = plan.tiling().state_in_bf16();
  const double atol = tensor ? kTensorAtol : kAtol, rtol = tensor ? kTensorRtol : kRtol;
  ws.reserve(static_cast<int64_t>(
      std::max(plan.workspace_bytes(), plan2.workspace_bytes()) / sizeof(float) + 1));
  const size_t ws_bytes = static_cast<size_t>(ws.capacity()) * sizeof(float);

  for (int d = 0; d < 2; ++d) {
    const bool reverse = d == 1;
    SCOPED_TRACE(reverse ? "reverse direction" : "forward direction");
    // Forward.
    poison(hp[d].data(), nh, ctx);
    poison(ws.data(), ws.capacity(), ctx);
    persistent_rnn_forward(plan, du[d].data(), dpre_in.data() + int64_t{d} * H, P, hp[d].data(),
                           dlen.data(), T, B, reverse, clip, ws.data(), ws_bytes, s);
    DS2_CUDA_CHECK(cudaGetLastError());
    DeviceArray<float> pre_copy;
    to_device(pre, pre_copy, s);
    poison(hg.data(), nh, ctx);
    gemm_forward(ctx, du_ref[d].data(), pre_copy.data() + int64_t{d} * H, P, hg.data(), zero.data(),
                 dlen.data(), len, T, B, H, reverse, clip, tensor);
    const std::vector<float> h_p = to_host(hp[d].data(), int64_t{T} * B * H, s);
    const std::vector<float> h_g = to_host(hg.data(), int64_t{T} * B * H, s);
    expect_close(h_g, h_p, "forward h vs GEMM recurrence", atol, rtol);
    if (with_cpu) {
      const std::vector<float> pre_d = columns(pre, int64_t{T} * B, P, d, H);
      expect_close(cpu_forward(u_ref[d], pre_d.data(), H, len, T, B, H, reverse, clip, tensor), h_p,
                   "forward h vs float64", atol, rtol);
    }

    // Backward-data, both from the persistent forward's h, into the direction's columns of a
    // {T, B, 2H} dpre (the other direction's columns must stay untouched).
    poison(dpre_p.data(), np, ctx);
    poison(ws.data(), ws.capacity(), ctx);
    persistent_rnn_backward_data(plan, du[d].data(), hp[d].data(), ddy.data(), H,
                                 dpre_p.data() + int64_t{d} * H, P, dlen.data(), T, B, reverse,
                                 clip, ws.data(), ws_bytes, s);
    DS2_CUDA_CHECK(cudaGetLastError());
    poison(dpre_g.data(), np, ctx);
    gemm_backward_data(ctx, du_ref[d].data(), hp[d].data(), ddy.data(),
                       dpre_g.data() + int64_t{d} * H, P, dlen.data(), len, T, B, H, reverse, clip,
                       tensor);
    const std::vector<float> all_p = to_host(dpre_p.data(), int64_t{T} * B * P, s);
    const std::vector<float> dp_p = columns(all_p, int64_t{T} * B, P, d, H);
    const std::vector<float> dp_g =
        columns(to_host(dpre_g.data(), int64_t{T} * B * P, s), int64_t{T} * B, P, d, H);
    expect_close(dp_g, dp_p, "backward-data dpre vs GEMM recurrence", atol, rtol);
    const std::vector<float> other = columns(all_p, int64_t{T} * B, P, 1 - d, H);
    EXPECT_TRUE(std::all_of(other.begin(), other.end(), [](float v) { return std::isnan(v); }))
        << "backward-data wrote the other direction's columns";
    if (with_cpu) {
      expect_close(cpu_backward_data(u_ref[d], h_p, dy, len, T, B, H, reverse, clip, tensor), dp_p,
                   "backward-data dpre vs float64", atol, rtol);
    }
  }

  // Both directions in one launch: the same numbers, bit for bit (the reduction order of a row
  // does not depend on how rows are spread over CTAs), when both plans run the same kernel kind.
  if (!plan2.fits()) return;
  auto same_kind = [](const kernels::PrnnTiling& a, const kernels::PrnnTiling& b) {
    return a.tensor_cores == b.tensor_cores && a.chunks == b.chunks &&
           kernels::prnn_mma_half_split(a) == kernels::prnn_mma_half_split(b);
  };
  const bool same = same_kind(plan2.tiling(), plan.tiling());
  const double atol2 = same ? 0 : atol, rtol2 = same ? 0 : rtol;
  DeviceArray<float> h2[2];
  PersistentRnnDirection dirs[2];
  for (int d = 0; d < 2; ++d) {
    h2[d].reserve(nh);
    poison(h2[d].data(), nh, ctx);
    dirs[d].u = du[d].data();
    dirs[d].x = dpre_in.data() + int64_t{d} * H;
    dirs[d].ld_x = P;
    dirs[d].y = h2[d].data();
    dirs[d].ld_y = H;
    dirs[d].reverse = d == 1;
  }
  poison(ws.data(), ws.capacity(), ctx);
  persistent_rnn_forward(plan2, dirs, dlen.data(), T, B, clip, ws.data(), ws_bytes, s);
  for (int d = 0; d < 2; ++d)
    expect_close(to_host(hp[d].data(), int64_t{T} * B * H, s),
                 to_host(h2[d].data(), int64_t{T} * B * H, s),
                 "two-direction launch forward, direction " + std::to_string(d), atol2, rtol2);
  for (int d = 0; d < 2; ++d) {
    dirs[d].x = ddy.data();
    dirs[d].ld_x = H;
    dirs[d].h = hp[d].data();
    dirs[d].y = dpre_p.data() + int64_t{d} * H;
    dirs[d].ld_y = P;
  }
  // Reference: the one-direction plan's dpre of each direction (all columns written below).
  std::vector<float> ref(int64_t{T} * B * P);
  for (int d = 0; d < 2; ++d) {
    persistent_rnn_backward_data(plan, du[d].data(), hp[d].data(), ddy.data(), H,
                                 dpre_g.data() + int64_t{d} * H, P, dlen.data(), T, B, d == 1, clip,
                                 ws.data(), ws_bytes, s);
  }
  ref = to_host(dpre_g.data(), int64_t{T} * B * P, s);
  poison(dpre_p.data(), np, ctx);
  poison(ws.data(), ws.capacity(), ctx);
  persistent_rnn_backward_data(plan2, dirs, dlen.data(), T, B, clip, ws.data(), ws_bytes, s);
  expect_close(ref, to_host(dpre_p.data(), int64_t{T} * B * P, s),
               "two-direction launch backward-data", atol2, rtol2);
}

// Every T, batch and hidden size of the brief appears; float64 checks where the host is quick.
const Case kCases[] = {
    {1, 1, 37},
    {7, 3, 37},
    {64, 8, 37},
    {300, 32, 37},
    {1, 32, 128},
    {7, 4, 128},
    {64, 3, 128},
    {300, 8, 128},
    {7, 1, 1000},
    {64, 4, 1000},
    {300, 3, 1000},
    {7, 32, 1000},
    {1, 4, 1152},
    {7, 8, 1152},
    {64, 4, 1152},
    {300, 4, 1152},
    {64, 32, 1152},
    {300, 1, 1152},
    {300, 32, 1152},
    // Two 4-column chunks per thread (batch passes of 4 from H 1600), and past where one fits.
    {64, 4, 2048},
    {33, 3, 1999},
    {7, 16, 1700},
    {300, 4, 1600},
    {16, 4, 2900},
    // One batch pass of 4, so no registers for the next pass's state: a fifth fp32 row group in
    // registers (DS2-large's 1920 in a two-direction launch); 2304: row groups in shared memory.
    {16, 4, 1920},
    {40, 4, 2304},
    // The stacked split (8-row m-tiles, 24 rows a CTA) in the two-direction launch at 6 and 8
    // k-tiles per warp (H 1152 above: 5; H 2304 and 2500 one direction: 10).
    {24, 4, 1500},
    {16, 3, 1580},
    // fp32 past batch 4: the split in batch groups of at most 4 rows, up to 8 sets (both
    // directions of batch 13-16 in 4 groups each; one direction of batch 32 in 8, above).
    {30, 16, 200},
    {9, 13, 320},
};

class PersistentRnnCase : public ::testing::TestWithParam<Case> {};

TEST_P(PersistentRnnCase, MatchesGemmRecurrenceAndFloat64) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  const Case c = GetParam();
  const double macs = double(c.T) * c.B * c.H * c.H;
  check_case(ctx, c, 1000 + c.T * 7 + c.B * 13 + c.H, /*with_cpu=*/macs <= 4e8);
}

INSTANTIATE_TEST_SUITE_P(Shapes, PersistentRnnCase, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return case_name(info.param);
                         });

// bf16: odd sizes, batch 1 to 64 (tensor-core passes of 8, 16, 32 and 64 batch columns, a
// partial last pass; cluster plans at batch <= 8 and H <= 1024, with 1 to 4 m-tiles per CTA), the
// DS2-large width, and hidden sizes past the tensor-core kernels (about 2600 at batch 4) where the
// fp32-math kernel holds bf16 rows in shared memory, its threads owning 8 columns (2752, 2999).
constexpr Precision kBf16 = Precision::kBf16;
const Case kBf16Cases[] = {
    {1, 1, 37, kBf16},
    {7, 3, 37, kBf16},
    {64, 8, 128, kBf16},
    {7, 1, 1000, kBf16},
    {64, 4, 1152, kBf16},
    {300, 4, 1152, kBf16},
    {64, 32, 1152, kBf16},
    {300, 1, 2048, kBf16},
    {32, 4, 2999, kBf16},
    {16, 3, 2752, kBf16},
    {7, 40, 200, kBf16},
    {64, 16, 1920, kBf16},
    {40, 4, 2304, kBf16},  // both directions: 48 rows a CTA, fragments past 3 k-tiles in shared
    {300, 4, 1920, kBf16},
    {300, 4, 1000, kBf16},
    {33, 8, 512, kBf16},
    {64, 2, 700, kBf16},
    {20, 64, 1100, kBf16},  // one pass of 64 batch columns
    // Batch groups on 132 SMs (sets of CTAs on slices of the batch): 2 tagged groups of 6, 2
    // groups of 32 (H 200 at batch 40 above: 4 groups of 10).
    {30, 12, 640, kBf16},
    {40, 64, 1000, kBf16},
    // Two m-tiles at 13-16 k-tiles a warp, most fragments in shared memory (one direction of H
    // 3073-4096): tagged at batch 3 (14 k-tiles), the step barrier at batch 5 (16 k-tiles, which
    // have no tagged kernel) and at 6 (14 k-tiles, one pass of 8 columns), passes of 32 and of 16
    // columns.
    {12, 3, 3329, kBf16},
    {8, 6, 3500, kBf16},  // the step barrier's one pass of 8 columns
    {10, 33, 3200, kBf16},
    {8, 48, 3584, kBf16},
    {6, 5, 4001, kBf16},
    {6, 24, 3900, kBf16},
};

INSTANTIATE_TEST_SUITE_P(Bf16, PersistentRnnCase, ::testing::ValuesIn(kBf16Cases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return case_name(info.param);
                         });

// Random operands of both directions of a layer (U, pre, dL/dh, lengths) and what a plan computes
// from them: forward h of each direction, then backward-data dpre {T, B, 2H}, in one launch of the
// plan's two directions or one launch per direction. Outputs and the workspace are poisoned first.
class BothDirections {
 public:
  BothDirections(CudaContext& ctx, int T, int B, int H, uint64_t seed)
      : ctx_(ctx), T_(T), B_(B), H_(H) {
    cudaStream_t s = ctx.stream();
    Rng rng(seed);
    const float a = 1.0f / std::sqrt(static_cast<float>(H));
    for (auto& u : du_) to_device(random_vector(int64_t{H} * H, rng, -a, a), u, s);
    to_device(random_vector(int64_t{T} * B * 2 * H, rng, -1.0f, 1.0f), dx_, s);
    to_device(random_vector(int64_t{T} * B * H, rng, -1.0f, 1.0f), ddy_, s);
    upload_lengths(make_lengths(T, B, rng), dlen_, s);
  }

  void run(const PersistentRnnPlan& plan, std::vector<float>* h, std::vector<float>* dp) {
    const int T = T_, B = B_, H = H_;
    cudaStream_t s = ctx_.stream();
    const int64_t nh = int64_t{T} * B * H;
    ws_.reserve(static_cast<int64_t>(plan.workspace_bytes() / sizeof(float) + 1));
    const size_t ws_bytes = static_cast<size_t>(ws_.capacity()) * sizeof(float);
    DeviceArray<float> hd[2], dpre;
    PersistentRnnDirection dirs[2];
    dpre.reserve(2 * nh);
    poison(dpre.data(), 2 * nh, ctx_);
    for (int d = 0; d < 2; ++d) {
      hd[d].reserve(nh);
      poison(hd[d].data(), nh, ctx_);
      dirs[d].u = du_[d].data();
      dirs[d].x = dx_.data() + int64_t{d} * H;
      dirs[d].ld_x = 2 * H;
      dirs[d].y = hd[d].data();
      dirs[d].ld_y = H;
      dirs[d].reverse = d == 1;
    }
    poison(ws_.data(), ws_.capacity(), ctx_);
    const int launches = plan.directions() == 2 ? 1 : 2;
    for (int i = 0; i < launches; ++i)
      persistent_rnn_forward(plan, dirs + i, dlen_.data(), T, B, 0.8f, ws_.data(), ws_bytes, s);
    for (int d = 0; d < 2; ++d) {
      dirs[d].x = ddy_.data();
      dirs[d].ld_x = H;
      dirs[d].h = hd[d].data();
      dirs[d].y = dpre.data() + int64_t{d} * H;
      dirs[d].ld_y = 2 * H;
    }
    for (int i = 0; i < launches; ++i)
      persistent_rnn_backward_data(plan, dirs + i, dlen_.data(), T, B, 0.8f, ws_.data(), ws_bytes,
                                   s);
    for (int d = 0; d < 2; ++d) h[d] = to_host(hd[d].data(), nh, s);
    *dp = to_host(dpre.data(), 2 * nh, s);
  }

  // Runs `plan` and expects every output equal, bit for bit, to `h_ref` and `dp_ref`.
  void expect_same(const PersistentRnnPlan& plan, const std::vector<float> (&h_ref)[2],
                   const std::vector<float>& dp_ref, const char* what) {
    SCOPED_TRACE(plan.describe());
    std::vector<float> h[2], dp;
    run(plan, h, &dp);
    for (int d = 0; d < 2; ++d)
      expect_close(h_ref[d], h[d], (std::string("forward h, ") + what).c_str(), 0, 0);
    expect_close(dp_ref, dp, (std::string("backward-data dpre, ") + what).c_str(), 0, 0);
  }

 private:
  CudaContext& ctx_;
  int T_, B_, H_;
  DeviceArray<float> du_[2], dx_, ddy_, ws_;
  DeviceArray<int> dlen_;
};

// The cluster kernel (bf16, batch <= 8, H <= 1024) and the grid-wide tensor-core kernel split K
// over the warps the same way and add in the same order: their outputs must agree bit for bit,
// forward and backward-data, one direction and both in one launch. Shapes: one m-tile per CTA
// and fewer than 16 CTAs (37, 200), 2, 3 and 4 m-tiles (512, 700, 1000), batch 1 to 8. The
// grid-wide kernel is checked with both exchanges (step barrier, tagged words) the same way.
TEST(PersistentRnn, ClusterKernelMatchesGridKernelBitForBit) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  struct Shape {
    int T, B, H;
  };
  int checked = 0;
  for (const Shape& c : {Shape{7, 1, 37}, Shape{64, 3, 200}, Shape{33, 8, 512}, Shape{50, 5, 700},
                         Shape{300, 4, 1000}, Shape{20, 1, 1000}}) {
    SCOPED_TRACE(case_name({c.T, c.B, c.H, Precision::kBf16}));
    const int B = c.B, H = c.H;
    BothDirections op(ctx, c.T, B, H, 77 + c.T + B + H);
    const PersistentRnnPlan grid(H, B, 1, -1, Precision::kBf16, PersistentRnnKernels{false});
    ASSERT_TRUE(grid.fits() && grid.tiling().tensor_cores && !grid.tiling().cluster)
        << grid.describe();
    std::vector<float> h_ref[2], dp_ref;
    op.run(grid, h_ref, &dp_ref);
    // The same tensor-core kernel with the other exchange (step barrier or tagged words).
    for (int directions : {1, 2}) {
      const bool tags = grid.tiling().tagged_exchange;
      const PersistentRnnPlan other(H, B, directions, -1, Precision::kBf16,
                                    PersistentRnnKernels{false, !tags});
      const bool differs =
          other.fits() && other.tiling().tensor_cores && other.tiling().tagged_exchange != tags;
      if (directions == 1) ASSERT_TRUE(differs) << other.describe();
      if (differs) op.expect_same(other, h_ref, dp_ref, "exchanges");
    }
    for (int directions : {1, 2}) {
      const PersistentRnnPlan cluster(H, B, directions, -1, Precision::kBf16, kClusterBeforeGrid);
      if (!cluster.fits() || !cluster.tiling().cluster) continue;  // e.g. no 16-CTA clusters
      op.expect_same(cluster, h_ref, dp_ref, "cluster vs grid");
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "this GPU runs no cluster plan (thread-block clusters: sm_90+)";
}

// bf16 past batch 8 where a layer's CTAs fill at most half (a quarter) of the SMs: 2 (4) sets of
// CTAs per direction, each on its own slice of the batch with its own exchange. Every output
// must be the one the plan without batch groups computes, bit for bit (the K split and the
// warps' order depend on H only). Shapes (132 SMs): 2 groups of unequal rows (B 9: 5 + 4, tagged
// sets), of 32 rows (H 1024 B 64), 4 groups of 10 (H 500), a batch far below the plan's (B 3 of
// 64: a group without rows), and both directions in one launch (4 sets: H 500, 200, 300).
TEST(PersistentRnn, Bf16BatchGroupsMatchOneSetBitForBit) {
  DS2_REQUIRE_GPU();
  cudaDeviceProp prop{};
  DS2_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  CudaContext ctx;
  struct Shape {
    int T, B, max_batch, H;
  };
  int grouped = 0;
  // The last three put 2-3 times the rows of the one-set plan on a CTA (on 132 SMs, H 2048 batch
  // 64: 2 groups of 32 rows; H 1152 and H 1500: 4 groups of 48).
  for (const Shape& c : {Shape{40, 9, 9, 1000}, Shape{20, 64, 64, 1024}, Shape{33, 40, 40, 500},
                         Shape{64, 3, 64, 200}, Shape{25, 17, 17, 300}, Shape{12, 64, 64, 2048},
                         Shape{16, 50, 64, 1152}, Shape{21, 33, 33, 1500}}) {
    SCOPED_TRACE(case_name({c.T, c.B, c.H, Precision::kBf16}) + "_max" +
                 std::to_string(c.max_batch));
    BothDirections op(ctx, c.T, c.B, c.H, 91 + c.T + c.B + c.H);
    PersistentRnnKernels no_groups;
    no_groups.batch_groups = false;
    const PersistentRnnPlan one(c.H, c.max_batch, 1, -1, Precision::kBf16, no_groups);
    ASSERT_TRUE(one.fits() && one.tiling().batch_groups == 1) << one.describe();
    std::vector<float> h_ref[2], dp_ref;
    op.run(one, h_ref, &dp_ref);
    for (int directions : {1, 2}) {
      const PersistentRnnPlan plan(c.H, c.max_batch, directions, -1, Precision::kBf16);
      ASSERT_TRUE(plan.fits()) << plan.why_not();
      const int sets = directions * plan.tiling().batch_groups;
      if (directions == 1 && prop.multiProcessorCount >= 128 && prop.major >= 8)
        EXPECT_GT(plan.tiling().batch_groups, 1) << plan.describe();
      if (plan.tiling().batch_groups == 1) continue;
      EXPECT_LE(sets * plan.tiling().ctas_per_direction, prop.multiProcessorCount);
      op.expect_same(plan, h_ref, dp_ref, "batch groups vs one set");
      ++grouped;
    }
  }
  if (grouped == 0) GTEST_SKIP() << "this GPU's plans leave no SMs for batch groups";
}

// bf16 kernels whose A fragments do not all fit in registers keep some k-tiles' in shared memory
// (kernels::prnn_mma_bf16_shared_k_tiles): both directions of H 2113-2560 (three m-tiles a CTA),
// their batch groups, one direction of H 2561-3072 (two m-tiles at 12 k-tiles a warp), the
// tagged kernel at two m-tiles and 10 k-tiles, and batch groups of 48 rows at 6-8 k-tiles (one
// direction of H 1408-1584 in 4 groups, both directions tagged). Each must compute what the
// step-barrier plan of
// one direction computes (all fragments in registers at H <= 2560), bit for bit: the K split
// and the order of the sums depend on H only.
TEST(PersistentRnn, Bf16FragmentsInSharedMemoryMatchBitForBit) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  struct Shape {
    int T, B, max_batch, H;
  };
  int shared = 0;
  for (const Shape& c : {Shape{20, 4, 4, 2304}, Shape{16, 1, 1, 2560}, Shape{12, 16, 16, 2200},
                         Shape{10, 40, 64, 2560}, Shape{9, 3, 4, 2900}, Shape{10, 32, 32, 1536},
                         Shape{11, 9, 12, 1408}, Shape{8, 61, 64, 1584}}) {
    SCOPED_TRACE(case_name({c.T, c.B, c.H, Precision::kBf16}) + "_max" +
                 std::to_string(c.max_batch));
    BothDirections op(ctx, c.T, c.B, c.H, 131 + c.T + c.B + c.H);
    const PersistentRnnPlan ref(c.H, c.max_batch, 1, -1, Precision::kBf16,
                                PersistentRnnKernels{false, false});
    if (!ref.fits() || !ref.tiling().tensor_cores) continue;
    std::vector<float> h_ref[2], dp_ref;
    op.run(ref, h_ref, &dp_ref);
    for (int directions : {1, 2}) {
      const PersistentRnnPlan plan(c.H, c.max_batch, directions, -1, Precision::kBf16);
      if (!plan.fits() || !plan.tiling().tensor_cores) continue;
      if (kernels::prnn_mma_bf16_shared_k_tiles(plan.tiling()) > 0) ++shared;
      op.expect_same(plan, h_ref, dp_ref, "vs one direction's step-barrier plan");
    }
  }
  if (shared == 0) GTEST_SKIP() << "no plan here keeps bf16 fragments in shared memory";
}

TEST(PersistentRnn, PlanFitsTheDs2LayerAndRefusesAbsurdSizes) {
  DS2_REQUIRE_GPU();
  cudaDeviceProp prop{};
  DS2_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  CudaContext ctx;
  PersistentRnnPlan plan(1152, 4);
  std::cout << plan.describe() << "\n";
  if (prop.multiProcessorCount >= 100) {
    EXPECT_TRUE(plan.fits()) << plan.why_not();
    EXPECT_TRUE(PersistentRnnPlan(1152, 4, 2).fits()) << PersistentRnnPlan(1152, 4, 2).why_not();
  }
  if (plan.fits()) {
    EXPECT_GT(plan.workspace_bytes(), 0u);
    EXPECT_EQ(plan.hidden(), 1152);
    EXPECT_EQ(plan.max_batch(), 4);
  }
  PersistentRnnPlan huge(100000, 4);
  EXPECT_FALSE(huge.fits());
  EXPECT_NE(huge.why_not().find("hidden 100000"), std::string::npos) << huge.why_not();
  PersistentRnnPlan wide(1152, 1 << 20);
  EXPECT_FALSE(wide.fits());
  EXPECT_NE(wide.why_not().find("shared memory"), std::string::npos) << wide.why_not();
  EXPECT_THROW(PersistentRnnPlan(0, 4), Error);
  EXPECT_THROW(PersistentRnnPlan(128, 4, 3), Error);

  const int max_h = PersistentRnnPlan::max_hidden(4);
  std::cout << "largest fp32 hidden size at batch 4 on " << prop.name << ": " << max_h
            << " (both directions in one launch: " << PersistentRnnPlan::max_hidden(4, 2) << ")\n";
  if (prop.multiProcessorCount >= 100) EXPECT_GE(max_h, 1152);
  if (max_h > 0) EXPECT_TRUE(PersistentRnnPlan(max_h, 4).fits());
  // Half-width weights: the on-chip budget holds more rows.
  const int max_bf16 = PersistentRnnPlan::max_hidden(4, 1, -1, Precision::kBf16);
  std::cout << "largest bf16 hidden size at batch 4: " << max_bf16 << " (both directions in one "
            << "launch: " << PersistentRnnPlan::max_hidden(4, 2, -1, Precision::kBf16) << ")\n";
  if (prop.multiProcessorCount >= 100) EXPECT_GT(max_bf16, max_h);
  // bf16 layers of DS2 size run on tensor cores, both directions in one launch.
  for (int batch : {1, 4, 32}) {
    PersistentRnnPlan bf16(1920, batch, 2, -1, Precision::kBf16);
    std::cout << bf16.describe() << "\n";
    if (prop.multiProcessorCount >= 100 && prop.major >= 8)
      EXPECT_TRUE(bf16.fits() && bf16.tiling().tensor_cores) << bf16.describe();
  }
  // Past batch 8, batch groups even where they double the rows a CTA holds (each CTA reads half
  // the state a step); one pass of a group's 32 batch columns.
  if (prop.multiProcessorCount >= 128 && prop.major >= 8) {
    const PersistentRnnPlan wide(2048, 64, 1, -1, Precision::kBf16);
    EXPECT_TRUE(wide.fits() && wide.tiling().tensor_cores && wide.tiling().batch_groups == 2 &&
                wide.tiling().rows_per_cta == 32 && wide.tiling().batch_tile == 32)
        << wide.describe();
  }
  // fp32 at batch 1-4: the tensor-core kernel with split operands (tagged), at batch 1 down to
  // the smallest layers (session 67); else the step barrier.
  if (prop.multiProcessorCount >= 100 && prop.major >= 8) {
    auto split = [](const PersistentRnnPlan& p) {
      return p.fits() && p.tiling().tensor_cores && !p.tiling().state_in_bf16() &&
             p.tiling().tagged_exchange;
    };
    const PersistentRnnPlan b1(640, 1), b1_mid(1152, 1), b1_1536(1536, 1), b1_large(1792, 1);
    const PersistentRnnPlan b1_small(513, 1), b1_both(600, 1, 2);
    const PersistentRnnPlan b2(512, 2), b2_large(1536, 2), b4(1152, 4), b4_large(2048, 4);
    EXPECT_TRUE(split(b1)) << b1.describe();
    EXPECT_TRUE(split(b1_small)) << b1_small.describe();
    EXPECT_TRUE(split(b1_both)) << b1_both.describe();
    // H times the batch tile up to 256: one CTA per direction.
    for (const auto& [H, B, D] :
         {std::tuple{192, 1, 1}, std::tuple{128, 2, 2}, std::tuple{64, 3, 1}, std::tuple{64, 4, 2},
          std::tuple{33, 1, 1}, std::tuple{1, 1, 2}}) {
      const PersistentRnnPlan single(H, B, D);
      EXPECT_TRUE(single.fits() && single.tiling().single_cta && single.workspace_bytes() == 0)
          << single.describe();
    }
    // Batch 1 at H 193-512: a cluster of such CTAs a direction.
    for (const auto& [H, D] : {std::pair{193, 1}, std::pair{384, 2}, std::pair{512, 2}}) {
      const PersistentRnnPlan cluster(H, 1, D);
      EXPECT_TRUE(cluster.fits() && cluster.tiling().single_cta &&
                  cluster.tiling().ctas_per_direction == (H <= 384 ? 8 : 16))
          << cluster.describe();
    }
    EXPECT_FALSE(PersistentRnnPlan(513, 1).tiling().single_cta);
    // Batch 2 at H 129-384: clusters of 8.
    for (const int H : {129, 384}) {
      const PersistentRnnPlan cluster(H, 2, 2);
      EXPECT_TRUE(cluster.fits() && cluster.tiling().single_cta &&
                  cluster.tiling().ctas_per_direction == 8)
          << cluster.describe();
    }
    EXPECT_FALSE(PersistentRnnPlan(385, 2).tiling().single_cta);
    // Batch 3-4 at H 65-192: clusters of 8.
    for (const auto& [H, B] : {std::pair{65, 3}, std::pair{192, 4}}) {
      const PersistentRnnPlan cluster(H, B, 2);
      EXPECT_TRUE(cluster.fits() && cluster.tiling().single_cta &&
                  cluster.tiling().ctas_per_direction == 8)
          << cluster.describe();
    }
    EXPECT_FALSE(PersistentRnnPlan(193, 3).tiling().single_cta);
    EXPECT_FALSE(PersistentRnnPlan(64, 5).tiling().single_cta);
    EXPECT_TRUE(split(b1_mid)) << b1_mid.describe();
    EXPECT_TRUE(split(b1_1536)) << b1_1536.describe();
    EXPECT_TRUE(split(b1_large)) << b1_large.describe();
    EXPECT_TRUE(split(b2)) << b2.describe();
    EXPECT_TRUE(split(b2_large)) << b2_large.describe();
    EXPECT_TRUE(split(b4)) << b4.describe();
    // fp32 on tensor cores, batch <= 4: the fp16 split, with the fp32-math kernel as its
    // fallback.
    auto half = [](const PersistentRnnPlan& p) {
      return p.fits() && kernels::prnn_mma_half_split(p.tiling()) && p.fallback() != nullptr &&
             !p.fallback()->tiling().tensor_cores;
    };
    ASSERT_TRUE(half(b4_large)) << b4_large.describe();  // its fallback is read below
    EXPECT_TRUE(half(PersistentRnnPlan(1920, 4, 2))) << PersistentRnnPlan(1920, 4, 2).describe();
    EXPECT_TRUE(half(PersistentRnnPlan(1152, 4, 2))) << PersistentRnnPlan(1152, 4, 2).describe();
    // Where 16-row m-tiles would put 32 rows on a CTA, the stacked split's 8-row m-tiles put 24:
    // one direction of H 2560 (from batch 2), both directions of H 1152.
    const PersistentRnnPlan h2560(2560, 3), h2560_b2(2560, 2), h2560_b1(2560, 1);
    const PersistentRnnPlan both_1152(1152, 4, 2);
    auto stacked = [&](const PersistentRnnPlan& p) {
      return half(p) && kernels::prnn_mma_stacked_split(p.tiling()) &&
             p.tiling().rows_per_cta == 24 && !kernels::prnn_mma_hi_in_shared(p.tiling());
    };
    if (prop.multiProcessorCount >= 108) {  // 20-24 rows a CTA
      EXPECT_TRUE(stacked(h2560)) << h2560.describe();
      EXPECT_TRUE(stacked(h2560_b2)) << h2560_b2.describe();
      EXPECT_TRUE(stacked(h2560_b1)) << h2560_b1.describe();
      EXPECT_TRUE(stacked(both_1152)) << both_1152.describe();
    }
    EXPECT_FALSE(kernels::prnn_mma_stacked_split(b4_large.tiling())) << b4_large.describe();
    EXPECT_FALSE(kernels::prnn_mma_stacked_split(b4.tiling())) << b4.describe();
    // The stacked split switched off (the form on fewer SMs): two 16-row m-tiles at 10 k-tiles
    // per warp keep some hi halves in shared memory, and are taken from batch 3 only (at batch
    // 2 the step barrier measured faster).
    const PersistentRnnKernels sixteen_rows{true, true, true, false};
    const PersistentRnnPlan h2560_16(2560, 3, 1, -1, Precision::kFp32, sixteen_rows);
    const PersistentRnnPlan h2560_16_b2(2560, 2, 1, -1, Precision::kFp32, sixteen_rows);
    if (prop.multiProcessorCount >= 128) {  // 20 rows a CTA, in two 16-row m-tiles
      EXPECT_TRUE(half(h2560_16) && kernels::prnn_mma_hi_in_shared(h2560_16.tiling()))
          << h2560_16.describe();
      EXPECT_FALSE(h2560_16_b2.tiling().tensor_cores) << h2560_16_b2.describe();
    }
    const PersistentRnnPlan no_half(2048, 4, 1, -1, Precision::kFp32,
                                    PersistentRnnKernels{true, true, false});
    EXPECT_TRUE(no_half.fits() && !no_half.tiling().tensor_cores) << no_half.describe();
    // Past batch 4: the split in batch groups of at most 4 rows, where every set's CTAs fit (H
    // 2048 batch 5: 2 sets of 64 CTAs of 32 rows; H 2560 needs 40 rows a CTA, which no split
    // kernel has; batch 33 would need 9 sets, both directions of batch 17 10).
    if (prop.multiProcessorCount >= 128) {
      const PersistentRnnPlan b5(2048, 5);
      EXPECT_TRUE(half(b5) && b5.tiling().batch_groups == 2) << b5.describe();
    }
    if (prop.multiProcessorCount >= 128) {  // both directions of batch 16: 8 sets of 12 CTAs
      const PersistentRnnPlan both16(192, 16, 2);
      EXPECT_TRUE(half(both16) && both16.tiling().batch_groups == 4) << both16.describe();
    }
    EXPECT_FALSE(PersistentRnnPlan(2560, 5).tiling().tensor_cores);
    EXPECT_FALSE(PersistentRnnPlan(128, 33).tiling().tensor_cores);
    EXPECT_FALSE(PersistentRnnPlan(128, 17, 2).tiling().tensor_cores);
    EXPECT_FALSE(PersistentRnnPlan(1024, 8, 1, -1, Precision::kFp32,
                                   PersistentRnnKernels{true, true, true, true, false})
                     .tiling()
                     .tensor_cores);
    // The fp32-math kernel's threads own 8 columns at batch passes of 4 from H 1600, and where
    // 4 do not fit; else 4.
    EXPECT_EQ(b4_large.fallback()->tiling().chunks, 2) << b4_large.describe();
    EXPECT_EQ(PersistentRnnPlan(2048, 32).tiling().chunks, 2);
    EXPECT_EQ(PersistentRnnPlan(2048, 1).tiling().chunks, 1);
    const PersistentRnnPlan b8(1152, 8);
    EXPECT_EQ((b8.fallback() ? b8.fallback()->tiling() : b8.tiling()).chunks, 1) << b8.describe();
    EXPECT_EQ(PersistentRnnPlan(1920, 4, 1, -1, Precision::kBf16).tiling().chunks, 1);
    // Past the tensor cores (the clipped-ReLU kernels hold at most 16 k-tiles a warp: H 4096;
    // from H 2561 some k-tiles' fragments in shared memory) at batch 1-2, rows streamed.
    const PersistentRnnPlan bf16_math(4608, 2, 1, -1, Precision::kBf16);
    EXPECT_TRUE(bf16_math.fits() && !bf16_math.tiling().tensor_cores &&
                bf16_math.tiling().chunks == 2)
        << bf16_math.describe();
    if (prop.multiProcessorCount >= 132) {
      const PersistentRnnPlan beyond(3000, 4);
      EXPECT_TRUE(beyond.fits() && beyond.tiling().chunks == 2) << beyond.describe();
    }
    if (prop.multiProcessorCount == 132 && prop.regsPerMultiprocessor == 65536) {
      // A batch of one pass holds no next-pass state: 20 of 32 rows per CTA in registers at
      // H 1920 in two directions (16 with the general kernel).
      const PersistentRnnPlan ds2_large(1920, 4, 2);
      EXPECT_EQ(ds2_large.fallback()->tiling().register_groups, 5) << ds2_large.describe();
    }
  }
  // bf16 layers at batch <= 8 take the tagged exchange; up to H 768 they can run as one
  // thread-block cluster per direction on sm_90 (the wavefront stack asks for it first): no
  // workspace (the exchange is in shared memory).
  for (int directions : {1, 2}) {
    PersistentRnnPlan small(768, 8, directions, -1, Precision::kBf16, kClusterBeforeGrid);
    PersistentRnnPlan tagged(768, 8, directions, -1, Precision::kBf16);
    std::cout << small.describe() << "\n" << tagged.describe() << "\n";
    if (prop.multiProcessorCount >= 100 && prop.major >= 9) {
      EXPECT_TRUE(small.fits() && small.tiling().cluster) << small.describe();
      EXPECT_EQ(small.workspace_bytes(), 0u);
      EXPECT_TRUE(tagged.fits() && tagged.tiling().tagged_exchange) << tagged.describe();
    }
  }
  EXPECT_EQ(parse_precision("bf16"), Precision::kBf16);
  EXPECT_THROW(parse_precision("fp8"), Error);

  // Calls a plan cannot serve are errors, not hangs: too large a batch, too small a workspace.
  if (plan.fits()) {
    DeviceArray<float> u(1152 * 1152), x(1152 * 8), h(1152 * 8), ws(1);
    DeviceArray<int> len(8);
    EXPECT_THROW(
        persistent_rnn_forward(plan, u.data(), x.data(), 1152, h.data(), len.data(), 1, 8, false,
                               20.0f, ws.data(), plan.workspace_bytes(), ctx.stream()),
        Error);
    EXPECT_THROW(persistent_rnn_forward(plan, u.data(), x.data(), 1152, h.data(), len.data(), 1, 4,
                                        false, 20.0f, ws.data(), 4, ctx.stream()),
                 Error);
  }
}

// One plan's forward and backward-data against float64 (random U, inputs, dL/dh and lengths;
// outputs and workspace poisoned first), to fp32's tolerance: fp32 plans, and bf16 plans whose
// state stays fp32 (the reference given U rounded to bf16).
void check_plan_against_float64(CudaContext& ctx, const PersistentRnnPlan& plan, int B, int T,
                                bool reverse, uint64_t seed) {
  cudaStream_t s = ctx.stream();
  const int H = plan.hidden();
  const float clip = 0.8f;
  SCOPED_TRACE("H " + std::to_string(H) + ", B " + std::to_string(B) + ", T " + std::to_string(T) +
               (reverse ? ", reverse" : "") + ", " + plan.describe());
  DeviceArray<float> ws(static_cast<int64_t>(plan.workspace_bytes() / sizeof(float) + 1));
  const size_t ws_bytes = static_cast<size_t>(ws.capacity()) * sizeof(float);
  Rng rng(seed);
  const float a = 1.0f / std::sqrt(static_cast<float>(H));
  const std::vector<float> u = random_vector(int64_t{H} * H, rng, -a, a);
  const std::vector<float> pre = random_vector(int64_t{T} * B * H, rng, -1.0f, 1.0f);
  const std::vector<float> dy = random_vector(int64_t{T} * B * H, rng, -1.0f, 1.0f);
  const std::vector<int> len = make_lengths(T, B, rng);
  ASSERT_FALSE(plan.tiling().state_in_bf16()) << "bf16 state: not fp32's tolerance";
  const std::vector<float> u_ref = plan.precision() == Precision::kBf16 ? rounded_to_bf16(u) : u;
  DeviceArray<float> du, dpre_in, ddy, h, dpre;
  DeviceArray<int> dlen;
  to_device(u, du, s);
  to_device(pre, dpre_in, s);
  to_device(dy, ddy, s);
  upload_lengths(len, dlen, s);
  const int64_t n = int64_t{T} * B * H;
  h.reserve(n);
  dpre.reserve(n);
  poison(h.data(), n, ctx);
  poison(ws.data(), ws.capacity(), ctx);
  persistent_rnn_forward(plan, du.data(), dpre_in.data(), H, h.data(), dlen.data(), T, B, reverse,
                         clip, ws.data(), ws_bytes, s);
  const std::vector<float> h_got = to_host(h.data(), n, s);
  expect_close(cpu_forward(u_ref, pre.data(), H, len, T, B, H, reverse, clip), h_got,
               "forward h vs float64");
  poison(dpre.data(), n, ctx);
  poison(ws.data(), ws.capacity(), ctx);
  persistent_rnn_backward_data(plan, du.data(), h.data(), ddy.data(), H, dpre.data(), H,
                               dlen.data(), T, B, reverse, clip, ws.data(), ws_bytes, s);
  expect_close(cpu_backward_data(u_ref, h_got, dy, len, T, B, H, reverse, clip),
               to_host(dpre.data(), n, s), "backward-data dpre vs float64");
}

// bf16 past batch 16: tensor-core plans or none. The fp32-math kernel on bf16 weights (on 132 SMs,
// since session 59's 14-16 k-tile kernels, only layers past H 4096, rows streamed at batch 1-2)
// runs 4 batch rows a pass and lost to the GEMM recurrence on bf16 operands from batch 24
// (session 58); the batch rule leaves batch 16 alone.
TEST(PersistentRnn, Bf16PastBatch16RunsOnTensorCoresOrTheGemmRecurrence) {
  DS2_REQUIRE_GPU();
  cudaDeviceProp prop{};
  DS2_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.multiProcessorCount < 128 || prop.major < 9) GTEST_SKIP() << "sizes set for H100/H200";
  for (int hidden : {200, 640, 1152, 2048, 2560, 3072, 3328, 3584, 4096})
    for (int batch : {17, 24, 33, 48, 64}) {
      const PersistentRnnPlan p(hidden, batch, 1, -1, Precision::kBf16);
      // At 14-16 k-tiles a warp (H 3073-4096) past batch 48: passes of 16 columns, which lost to
      // the GEMM recurrence (session 59).
      if (hidden > 3072 && batch > 48) {
        EXPECT_FALSE(p.fits()) << p.describe();
        EXPECT_NE(p.why_not().find("at most 16 batch columns"), std::string::npos) << p.why_not();
        continue;
      }
      EXPECT_TRUE(p.fits() && p.tiling().tensor_cores)
          << hidden << " " << batch << ": " << p.describe();
    }
  // At 14 k-tiles a warp the tagged exchange up to batch 3, the step barrier from 4.
  for (int batch : {1, 3, 4, 8}) {
    const PersistentRnnPlan p(3328, batch, 1, -1, Precision::kBf16);
    EXPECT_TRUE(p.fits() && p.tiling().tensor_cores) << p.describe();
    EXPECT_EQ(p.tiling().tagged_exchange, batch <= 3) << p.describe();
  }
  const PersistentRnnPlan past(4224, 24, 1, -1, Precision::kBf16);
  EXPECT_FALSE(past.fits()) << past.describe();
  EXPECT_NE(past.why_not().find("GEMM recurrence on bf16 operands"), std::string::npos)
      << past.why_not();
  // At batch 16 the rule does not refuse (H 4224 needs more registers than a CTA has there, a
  // different reason), and at batch 2 the layer runs persistently, its last rows streamed.
  const PersistentRnnPlan sixteen(4224, 16, 1, -1, Precision::kBf16);
  EXPECT_FALSE(sixteen.fits() && sixteen.tiling().tensor_cores) << sixteen.describe();
  EXPECT_EQ(sixteen.why_not().find("GEMM recurrence on bf16 operands"), std::string::npos)
      << sixteen.why_not();
  const PersistentRnnPlan two(4224, 2, 1, -1, Precision::kBf16);
  EXPECT_TRUE(two.fits() && !two.tiling().tensor_cores && two.tiling().streamed_groups > 0)
      << two.describe();
}

// The fp32 tensor-core kernels (U and the state split into two fp16 halves) against float64 at
// every batch their plan (max batch 4) is called with, 1 to 4: fp32 accuracy, not bf16's. Hidden
// sizes of 1, 2, 4, 5, 6 and 8 k-tiles per warp (backward-data with the gradients scaled; odd
// counts leave half of a warp's last exchange piece unused; from 5 part of U's lo halves in
// shared memory), and 10 (H 2500) in both forms of 32 rows a CTA or fewer: the stacked split's
// three 8-row m-tiles (the plan's pick on 132 SMs) and, with it switched off, two 16-row m-tiles
// with some hi halves in shared memory too (what fewer SMs run); none a multiple of 16; both
// directions. H 2136 = 89 CTAs of 24 rows, 8 short of its 134 k-tiles: the plan adds a 90th CTA
// that owns the padding (before, the launch waited forever for those 8 state elements).
TEST(PersistentRnn, Fp32SplitKernelMatchesFloat64AtEveryBatch) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  int checked = 0;
  constexpr PersistentRnnKernels kSixteenRowSplit{true, true, true, false};
  PersistentRnnKernels grid_wide;  // not the single-CTA kernel small layers take
  grid_wide.single_cta = false;
  for (const auto& [H, kernels] :
       std::vector<std::pair<int, PersistentRnnKernels>>{{37, grid_wide},
                                                         {300, {}},
                                                         {1000, {}},
                                                         {1150, {}},
                                                         {1500, {}},
                                                         {1999, {}},
                                                         {2136, {}},
                                                         {2500, {}},
                                                         {2500, kSixteenRowSplit}}) {
    const PersistentRnnPlan plan(H, 4, 1, -1, Precision::kFp32, kernels);
    if (!plan.fits() || !plan.tiling().tensor_cores) continue;  // e.g. fewer SMs: H 1500 misses
    ASSERT_FALSE(plan.tiling().state_in_bf16()) << plan.describe();
    for (int B = 1; B <= 4; ++B) {
      check_plan_against_float64(ctx, plan, B, B == 2 ? 1 : 40, B % 2 == 1, 900 + H + B);
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "this GPU plans no fp32 tensor-core layer (sm_80+, 100+ SMs)";
}

// The single-CTA kernel (small fp32 layers; kernels/persistent_rnn_single.h) at every
// instantiation the plans reach, odd sizes, every batch up to its plan's, both orders, against
// float64; and both directions in one launch give the bits of one launch each. One CTA: batch
// tile 1 on 2 rows a thread at 1-3 column groups (H 1-96) and 4 at 4-6 (H 97-192), batch tile 2 on
// 2 or 4 rows (H 1-128), batch tile 4 on 2 rows (H 1-64). Clusters: batch 1 (H 200-512), batch 2
// (H 129-384) and batch 3-4 (H 65-192; 8 CTAs of 9-24 rows, the last with fewer). T 64 (two whole
// chunks of staged steps at batch 1), 45 (a partial last chunk) and 1. Plans take one CTA where H
// times the batch tile is at most 256; the rest of the one-CTA shapes are asked for. The shapes
// come in four groups so that compute-sanitizer's racecheck, which takes minutes over all of
// them, can run one group at a time (--gtest_filter='*Fp32SingleCta*Batch3To4*').
struct SingleCtaShapes {
  const char* name;
  std::vector<std::pair<int, int>> hidden_and_max_batch;
};

class Fp32SingleCta : public ::testing::TestWithParam<SingleCtaShapes> {};

TEST_P(Fp32SingleCta, KernelMatchesFloat64) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  PersistentRnnKernels forced;
  forced.force_single_cta = true;
  for (const auto& [H, max_batch] : GetParam().hidden_and_max_batch) {
    SCOPED_TRACE("H " + std::to_string(H) + " batch <= " + std::to_string(max_batch));
    const PersistentRnnPlan plan(H, max_batch, 1, -1, Precision::kFp32, forced);
    ASSERT_TRUE(plan.fits() && plan.tiling().single_cta) << plan.describe();
    for (int B = 1; B <= max_batch; ++B) {
      const int T = B == 1 ? 64 : B == 2 ? 1 : 45;
      check_plan_against_float64(ctx, plan, B, T, (H + B) % 2 == 1, 1300 + H + B);
    }
    const PersistentRnnPlan both(H, max_batch, 2, -1, Precision::kFp32, forced);
    ASSERT_TRUE(both.fits() && both.tiling().single_cta) << both.describe();
    BothDirections layer(ctx, 30, max_batch, H, 1400 + H);
    std::vector<float> h[2], dp;
    layer.run(plan, h, &dp);
    layer.expect_same(both, h, dp, "both directions on one CTA each in one launch");
  }
}

INSTANTIATE_TEST_SUITE_P(
    PersistentRnn, Fp32SingleCta,
    ::testing::Values(SingleCtaShapes{"OneCta",
                                      {{1, 1},
                                       {5, 4},
                                       {31, 2},
                                       {33, 2},
                                       {64, 4},
                                       {70, 2},
                                       {90, 1},
                                       {127, 2},
                                       {161, 1},
                                       {192, 2}}},
                      SingleCtaShapes{"ClustersAtBatch1",
                                      {{200, 1}, {256, 1}, {300, 1}, {384, 1}, {449, 1}, {512, 1}}},
                      SingleCtaShapes{"ClustersAtBatch2", {{192, 2}, {250, 2}, {257, 2}, {384, 2}}},
                      SingleCtaShapes{
                          "ClustersAtBatch3To4",
                          {{95, 3}, {97, 3}, {160, 4}, {65, 4}, {101, 3}, {129, 4}, {189, 4}}}),
    [](const ::testing::TestParamInfo<SingleCtaShapes>& info) { return info.param.name; });

// The fp32-math kernel with the tagged exchange, which fp32 plans at batch 1 and H <= 512 take
// only where the fp16 split is not allowed (session 67 measured the split faster there): odd and
// even sizes, both orders, against float64.
TEST(PersistentRnn, Fp32MathTaggedKernelMatchesFloat64AtBatch1) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  PersistentRnnKernels no_split{true, true, false};
  no_split.single_cta = false;
  for (const int H : {37, 300, 512}) {
    const PersistentRnnPlan plan(H, 1, 1, -1, Precision::kFp32, no_split);
    ASSERT_TRUE(plan.fits() && plan.tiling().tagged_exchange && !plan.tiling().tensor_cores)
        << plan.describe();
    check_plan_against_float64(ctx, plan, 1, 40, H % 2 == 1, 1100 + H);
  }
}

// fp32 past batch 4 on the fp16 split: batch groups of at most 4 rows, each set of CTAs on its
// own slice of the batch with its own exchange, one scale for backward-data a direction. Against
// float64 at the plan's batch, 3 fewer, and 1 (the second set then has no rows), at 16-row
// (H 300, 500), stacked 24-row (1150, 1536) and two-m-tile (1999) CTAs, 2 and 4 groups.
TEST(PersistentRnn, Fp32SplitBatchGroupsMatchFloat64) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  int checked = 0;
  for (const auto& [H, max_batch] :
       std::vector<std::pair<int, int>>{{300, 8}, {500, 16}, {1150, 8}, {1536, 8}, {1999, 8}}) {
    const PersistentRnnPlan plan(H, max_batch);
    if (!plan.fits() || !kernels::prnn_mma_half_split(plan.tiling())) {
      std::cout << "no fp16 split at H " << H << " batch " << max_batch << ": " << plan.describe()
                << "\n";
      continue;
    }
    ASSERT_EQ(plan.tiling().batch_groups, (max_batch + 3) / 4) << plan.describe();
    for (int B : {max_batch, max_batch - 3, 1}) {
      check_plan_against_float64(ctx, plan, B, B == 1 ? 9 : 30, B % 2 == 1, 700 + H + B);
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "this GPU plans no fp32 batch groups (sm_80+, 100+ SMs)";
}

// Rows streamed from L2 every step (layers past what registers and shared memory hold), forced at
// sizes that fit on chip: 1 to 3 streamed row groups a CTA (all of its rows at H 37, 300 and
// 1000), fp32 and bf16 weights, batch 1 to 7 (one pass and two), odd H, one direction against
// float64, and both directions in one launch against two one-direction launches bit for bit. Then
// the plan's own choice past the on-chip limit (fp32 H 3584 at batch 1, bf16 H 4608 at batch 2).
// bf16 streams two passes only where forced: to H 4096 the tensor cores hold every batch up to
// 48, and past it 4 batch rows a pass need more registers than the CTA's threads leave.
TEST(PersistentRnn, StreamedRowsMatchFloat64) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  struct StreamedCase {
    int H, B, T, streamed_groups;
  };
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    for (const StreamedCase& c :
         {StreamedCase{37, 1, 7, 1}, StreamedCase{300, 3, 40, 1}, StreamedCase{1000, 4, 30, 2},
          StreamedCase{1700, 7, 20, 2}, StreamedCase{2999, 2, 9, 3}}) {
      PersistentRnnKernels forced;
      forced.min_streamed_groups = c.streamed_groups;
      const PersistentRnnPlan plan(c.H, c.B, 1, -1, precision, forced);
      ASSERT_TRUE(plan.fits()) << plan.why_not();
      ASSERT_GE(plan.tiling().streamed_groups, c.streamed_groups) << plan.describe();
      check_plan_against_float64(ctx, plan, c.B, c.T, c.B % 2 == 1, 500 + c.H + c.B);
    }
    PersistentRnnKernels forced;
    forced.min_streamed_groups = 2;
    const PersistentRnnPlan one(1700, 4, 1, -1, precision, forced);
    const PersistentRnnPlan both(1700, 4, 2, -1, precision, forced);
    ASSERT_TRUE(one.fits() && both.fits()) << one.why_not() << both.why_not();
    ASSERT_EQ(one.tiling().threads, both.tiling().threads);  // the same order of sums
    BothDirections layer(ctx, 20, 4, 1700, 77);
    std::vector<float> h[2], dp;
    layer.run(one, h, &dp);
    layer.expect_same(both, h, dp, "both directions streamed in one launch");
  }
  const PersistentRnnPlan fp32(3584, 1), bf16(4608, 2, 1, -1, Precision::kBf16);
  // On 132 SMs (H100 SXM, H200: the GPUs these sizes were measured on) every one of them must
  // stream; other GPUs may hold them on chip or not at all.
  cudaDeviceProp prop{};
  DS2_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  for (const auto* p : {&fp32, &bf16}) {
    std::cout << p->describe() << "\n";
    if (prop.multiProcessorCount == 132)
      ASSERT_TRUE(p->fits() && p->tiling().streamed_groups > 0) << p->describe();
    if (!p->fits() || p->tiling().streamed_groups == 0) continue;
    check_plan_against_float64(ctx, *p, p->max_batch(), 4, true, 31);
  }
}

// Tagged tensor-core plans give every state element of the padded k-tiles an owner (a reader
// waits for each one's tag, so one without an owner hangs the launch): every hidden size of
// H 1000-2600 on this GPU (the stacked split's ranges among them), one direction and two.
TEST(PersistentRnn, TaggedPlansOwnEveryPaddedStateElement) {
  DS2_REQUIRE_GPU();
  int tagged = 0;
  for (int directions = 1; directions <= 2; ++directions)
    for (int batch : {1, 4})
      for (int H = 1000; H <= 2600; H += directions == 1 ? 1 : 3) {
        const PersistentRnnPlan plan(H, batch, directions);
        const kernels::PrnnTiling& t = plan.tiling();
        if (!plan.fits() || !t.tensor_cores || !t.tagged_exchange || t.cluster) continue;
        ++tagged;
        ASSERT_GE(int64_t{t.ctas_per_direction} * t.rows_per_cta, kernels::prnn_mma_padded_rows(H))
            << plan.describe();
      }
  if (tagged == 0) GTEST_SKIP() << "this GPU plans no tagged tensor-core layer";
}

// The fp16 split's backward-data exchanges dL/dh times a power of two chosen from the largest
// |dy|, so scaling dy by 2^60 or 2^-60 must scale dpre by exactly that, bit for bit (unscaled,
// fp16 would flush 2^-60 to zero and overflow at 2^60; a rerun on the fallback would sum in
// another order). Where a scaled value does leave fp16's range (gradients doubling every step)
// or dy holds a NaN, dpre must be exactly what the fp32-math fallback computes on its own.
TEST(PersistentRnn, Fp16SplitBackwardDataScalesAndFallsBack) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  cudaStream_t s = ctx.stream();
  const int H = 1999, B = 4, T = 24;
  const float clip = 20.0f;
  const PersistentRnnPlan plan(H, B);
  if (!plan.fits() || !kernels::prnn_mma_half_split(plan.tiling()))
    GTEST_SKIP() << "this GPU plans no fp16 split at H " << H << ": " << plan.describe();
  ASSERT_NE(plan.fallback(), nullptr);
  const PersistentRnnPlan& fallback = *plan.fallback();
  DeviceArray<float> ws(static_cast<int64_t>(plan.workspace_bytes() / sizeof(float) + 1));
  const size_t ws_bytes = static_cast<size_t>(ws.capacity()) * sizeof(float);
  Rng rng(77);
  const std::vector<int> len = make_lengths(T, B, rng);
  // h only masks the gradient (0 < h < clip): inside the clip everywhere, so nothing is masked
  // and growth through U^T is not cut off.
  const std::vector<float> h = random_vector(int64_t{T} * B * H, rng, 0.1f, 0.5f);
  const std::vector<float> dy = random_vector(int64_t{T} * B * H, rng, -1.0f, 1.0f);
  DeviceArray<float> dh, ddy, dpre, du;
  DeviceArray<int> dlen;
  to_device(h, dh, s);
  upload_lengths(len, dlen, s);
  const int64_t n = int64_t{T} * B * H;
  dpre.reserve(n);
  auto backward = [&](const PersistentRnnPlan& p, const std::vector<float>& u,
                      const std::vector<float>& x) {
    to_device(u, du, s);
    to_device(x, ddy, s);
    poison(dpre.data(), n, ctx);
    poison(ws.data(), ws.capacity(), ctx);
    persistent_rnn_backward_data(p, du.data(), dh.data(), ddy.data(), H, dpre.data(), H,
                                 dlen.data(), T, B, /*reverse=*/false, clip, ws.data(), ws_bytes,
                                 s);
    DS2_CUDA_CHECK(cudaGetLastError());
    return to_host(dpre.data(), n, s);
  };
  auto scaled = [](std::vector<float> v, float f) {
    for (float& x : v) x *= f;
    return v;
  };

  // Contractive U: the split's own result, within fp32 accuracy of float64.
  const float a = 1.0f / std::sqrt(static_cast<float>(H));
  const std::vector<float> u = random_vector(int64_t{H} * H, rng, -a, a);
  const std::vector<float> base = backward(plan, u, dy);
  expect_close(cpu_backward_data(u, h, dy, len, T, B, H, false, clip), base,
               "backward-data dpre vs float64");
  const float big = std::ldexp(1.0f, 60), small = std::ldexp(1.0f, -60);
  expect_bits_equal(scaled(base, big), backward(plan, u, scaled(dy, big)), "dy x 2^60");
  expect_bits_equal(scaled(base, small), backward(plan, u, scaled(dy, small)), "dy x 2^-60");
  const std::vector<float> own = backward(fallback, u, dy);
  EXPECT_NE(std::memcmp(own.data(), base.data(), n * sizeof(float)), 0)
      << "the split and the fp32-math kernel summed alike: was the split run at all?";

  // U^T doubles the gradient every step (uniform entries of +-2 sqrt(3 / H)): 2^24 over the
  // sequence, past fp16's range after the scale's 2^8 of headroom, well within fp32's.
  const float grow = 2.0f * std::sqrt(3.0f / static_cast<float>(H));
  const std::vector<float> u_grow = random_vector(int64_t{H} * H, rng, -grow, grow);
  const std::vector<float> grown = backward(fallback, u_grow, dy);
  EXPECT_GT(*std::max_element(grown.begin(), grown.end()), 1e5f) << "the gradients did not grow";
  expect_bits_equal(grown, backward(plan, u_grow, dy), "overflowing gradients");

  // A NaN in dy inside the lengths: as the fp32-math kernel propagates it.
  const int b = static_cast<int>(std::max_element(len.begin(), len.end()) - len.begin());
  std::vector<float> nan_dy = dy;
  nan_dy[(int64_t{len[b] - 1} * B + b) * H + 5] = std::nanf("");
  expect_bits_equal(backward(fallback, u, nan_dy), backward(plan, u, nan_dy), "a NaN in dy");
}

// The scale comes from each direction's largest |dL/dh| over the frames inside the lengths: values
// past a length and in the padding columns of dy's rows (ld > H) must not count. Rows read 4 bytes
// a lane (H odd), 16 bytes a lane (H and ld multiples of 4), both directions in one launch, batch
// 1, and both directions of batch 16 in batch groups (8 sets: direction 1's scan starts at its
// first set, set 4, not set 1).
TEST(PersistentRnn, Fp16SplitBackwardDataScansItsGradientsInsideTheLengths) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  cudaStream_t s = ctx.stream();
  struct ScanCase {
    int H, B, T, directions;
    int64_t ld;
  };
  const float clip = 20.0f, ignored = 1e30f;
  int checked = 0;
  for (const ScanCase c : {ScanCase{1999, 4, 37, 1, 1999}, ScanCase{1152, 1, 61, 2, 1156},
                           ScanCase{515, 3, 19, 2, 520}, ScanCase{200, 16, 90, 2, 204}}) {
    SCOPED_TRACE("H " + std::to_string(c.H) + " B " + std::to_string(c.B) + " directions " +
                 std::to_string(c.directions));
    const PersistentRnnPlan plan(c.H, c.B, c.directions);
    if (!plan.fits() || !kernels::prnn_mma_half_split(plan.tiling())) {
      std::cout << "no fp16 split here: " << plan.describe() << "\n";
      continue;
    }
    Rng rng(c.H + c.B);
    std::vector<int> len(c.B);
    for (int b = 0; b < c.B; ++b) len[b] = c.T - 3 - 5 * b;  // every row ends before T
    const int64_t rows = int64_t{c.T} * c.B, n = rows * c.H;
    const float a = 1.0f / std::sqrt(static_cast<float>(c.H));
    DeviceArray<float> du, dh, ddy[2], dpre[2];
    DeviceArray<int> dlen;
    to_device(random_vector(int64_t{c.H} * c.H, rng, -a, a), du, s);
    to_device(random_vector(n, rng, 0.1f, 0.5f), dh, s);
    upload_lengths(len, dlen, s);
    PersistentRnnDirection dirs[2];
    unsigned int expected[2] = {0u, 0u};
    for (int d = 0; d < c.directions; ++d) {
      std::vector<float> dy = random_vector(rows * c.ld, rng, -1.0f, 1.0f);
      for (int64_t row = 0; row < rows; ++row) {
        const int t = static_cast<int>(row / c.B), b = static_cast<int>(row % c.B);
        for (int64_t k = 0; k < c.ld; ++k) {
          float& v = dy[row * c.ld + k];
          if (t >= len[b] || k >= c.H)
            v = ignored;
          else
            expected[d] = std::max(expected[d], float_bits(std::fabs(v)));
        }
      }
      to_device(dy, ddy[d], s);
      dpre[d].reserve(rows * c.ld);
      dirs[d].u = du.data();
      dirs[d].x = ddy[d].data();
      dirs[d].ld_x = c.ld;
      dirs[d].h = dh.data();
      dirs[d].y = dpre[d].data();
      dirs[d].ld_y = c.ld;
      dirs[d].reverse = d == 1;
    }
    DeviceArray<float> ws(static_cast<int64_t>(plan.workspace_bytes() / sizeof(float) + 1));
    poison(ws.data(), ws.capacity(), ctx);
    persistent_rnn_backward_data(plan, dirs, dlen.data(), c.T, c.B, clip, ws.data(),
                                 static_cast<size_t>(ws.capacity()) * sizeof(float), s);
    DS2_CUDA_CHECK(cudaGetLastError());
    unsigned int found[2] = {0u, 0u};
    DS2_CUDA_CHECK(cudaMemcpyAsync(found,
                                   kernels::prnn_mma_grad_max_words(plan.tiling(), ws.data()),
                                   sizeof(found), cudaMemcpyDeviceToHost, s));
    DS2_CUDA_CHECK(cudaStreamSynchronize(s));
    for (int d = 0; d < c.directions; ++d)
      EXPECT_EQ(found[d], expected[d]) << "direction " << d << ": " << bits_float(found[d])
                                       << " found, " << bits_float(expected[d]) << " expected";
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "this GPU plans no fp16 split for any scan case";
}

TEST(PersistentRnn, EmptySequencesAndZeroLengths) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  const int H = 128, B = 3, T = 5;
  PersistentRnnPlan plan(H, B);
  ASSERT_TRUE(plan.fits()) << plan.why_not();
  Rng rng(3);
  DeviceArray<float> u, pre, h, ws(static_cast<int64_t>(plan.workspace_bytes() / 4 + 1));
  to_device(random_vector(H * H, rng, -0.1f, 0.1f), u, ctx.stream());
  to_device(random_vector(T * B * H, rng, 0.5f, 1.0f), pre, ctx.stream());
  h.reserve(T * B * H);
  DeviceArray<int> len;
  upload_lengths({0, 0, 0}, len, ctx.stream());
  // T = 0 and B = 0 launch nothing.
  persistent_rnn_forward(plan, u.data(), pre.data(), H, h.data(), len.data(), 0, B, false, 20.0f,
                         ws.data(), plan.workspace_bytes(), ctx.stream());
  persistent_rnn_forward(plan, u.data(), pre.data(), H, h.data(), len.data(), T, 0, false, 20.0f,
                         ws.data(), plan.workspace_bytes(), ctx.stream());
  // All lengths 0: every h is zero (pre is positive, so a missed mask shows).
  poison(h.data(), T * B * H, ctx);
  persistent_rnn_forward(plan, u.data(), pre.data(), H, h.data(), len.data(), T, B, true, 20.0f,
                         ws.data(), plan.workspace_bytes(), ctx.stream());
  const std::vector<float> got = to_host(h.data(), T * B * H, ctx.stream());
  EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float v) { return v == 0.0f; }));
}

// Whole layers: CudaRnnLayer with the persistent recurrence vs the CPU RnnLayer and vs
// CudaRnnLayer with the GEMM recurrence. Forward outputs always; backward (dx and every parameter
// gradient) of the two GPU recurrences from the SAME forward states (the same layer, switched to
// the GEMM path for a second backward), so a pre-activation rounding to the other side of 0 or of
// the clip cannot flip a derivative mask between them; backward vs the CPU (whose states differ in
// the last bits) only where `cpu_backward` (small layers, where such a flip is improbable).
// `path`: where set, a phrase the layer's recurrence_path() must contain.
void check_layer(CudaContext& ctx, bool bidirectional, bool batch_norm, int H, const Shape& shape,
                 const std::vector<int>& lengths, bool cpu_backward, uint64_t seed,
                 const char* path = nullptr) {
  SCOPED_TRACE(std::string(bidirectional ? "bi" : "uni") + (batch_norm ? " bn" : "") + " H" +
               std::to_string(H) + " " + shape_str(shape));
  Rng rng(seed);
  const int T = static_cast<int>(shape[0]), B = static_cast<int>(shape[1]);
  const int in = static_cast<int>(shape[2]);
  ParameterStore store;
  RnnLayer cpu("rnn", store, in, H, RnnType::kRelu, bidirectional, batch_norm, 1.0f, 0.1f);
  store.finalize();
  store.initialize(rng);
  // Device copies before the CPU forward updates the running statistics.
  DeviceParameters params_gemm(ctx, store), params(ctx, store);
  Tensor& cpu_grads = store.grads();
  for (int64_t i = 0; i < cpu_grads.numel(); ++i) cpu_grads[i] = 0.0f;
  const Sequences x = random_sequences(shape, lengths, rng);
  const Sequences dy = random_sequences({T, B, H}, lengths, rng);
  Sequences y_ref, dx_ref;
  cpu.forward(x, y_ref, true);
  cpu.backward(x, y_ref, dy, dx_ref);

  DeviceSequences xd, dyd, yd, yd_gemm, dxd;
  upload(x, xd, ctx.stream());
  upload(dy, dyd, ctx.stream());

  // Forward: the GEMM recurrence on its own layer and parameters, then the persistent one.
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
  EXPECT_TRUE(gpu.ran_persistent());
  if (path) EXPECT_NE(gpu.recurrence_path().find(path), std::string::npos) << gpu.recurrence_path();
  const Tensor y = download_tensor(yd.data, ctx);
  ds2::expect_close(y_ref.data, y, 2e-5, 1e-4, "persistent layer forward vs CPU");
  ds2::expect_close(download_tensor(yd_gemm.data, ctx), y, kAtol, kRtol,
                    "persistent vs GEMM layer forward");

  // Backward twice from the persistent forward's states: persistent, then GEMM recurrence.
  Tensor dx[2], grads[2];
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
  ds2::expect_close(dx[0], dx[1], 1e-5, 1e-4, "persistent vs GEMM layer dx");
  for (const ParamEntry& e : store.parameters())
    // Weight gradients sum T*B products of dpre values that differ in the last bits (another
    // summation order), with cancellation: the GEMM RNN tests' gradient tolerance.
    ds2::expect_close(grads[0].data() + e.offset, grads[1].data() + e.offset, e.numel, 1e-4, 1e-3,
                      "persistent vs GEMM layer grad " + e.name);
  if (!cpu_backward) return;
  ds2::expect_close(dx_ref.data, dx[1], 1e-4, 1e-3, "persistent layer dx vs CPU");
  for (const ParamEntry& e : store.parameters())
    ds2::expect_close(cpu_grads.data() + e.offset, grads[1].data() + e.offset, e.numel, 1e-4, 1e-3,
                      "persistent layer grad " + e.name + " vs CPU");
}

TEST(PersistentRnn, LayerMatchesCpuAndGemmRecurrence) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  uint64_t seed = 50;
  for (bool bi : {false, true})
    for (bool bn : {false, true}) {
      check_layer(ctx, bi, bn, 128, {7, 3, 20}, {7, 0, 4}, /*cpu_backward=*/true, ++seed);
      check_layer(ctx, bi, bn, 1000, {20, 8, 33}, {20, 3, 0, 19, 20, 7, 1, 12}, false, ++seed);
    }
  check_layer(ctx, true, true, 1152, {64, 4, 40}, {64, 50, 0, 63}, false, ++seed);
}

// A bidirectional layer runs its directions one after the other where both in one launch would
// leave the tensor cores (U past their registers at half the SMs a direction) and the batch makes
// the fp32-math kernel the slower (directions_in_turn_faster); elsewhere in one launch.
TEST(PersistentRnn, BidirectionalLayersRunInTurnWhereOneLaunchIsSlower) {
  DS2_REQUIRE_GPU();
  struct Case {
    int hidden, batch;
    Precision precision;
  };
  cudaDeviceProp prop{};
  DS2_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  // The cases are such layers on 132 SMs (H100, H200; session 55's sweep): there each must be one.
  const bool h100_sized = prop.multiProcessorCount == 132 && prop.regsPerMultiprocessor == 65536;
  int checked = 0;
  for (const Case& c : {Case{2752, 16, Precision::kBf16}, Case{2112, 2, Precision::kFp32},
                        Case{2048, 8, Precision::kFp32}}) {
    SCOPED_TRACE("H " + std::to_string(c.hidden) + " batch " + std::to_string(c.batch));
    const PersistentRnnPlan both(c.hidden, c.batch, 2, -1, c.precision);
    const PersistentRnnPlan one(c.hidden, c.batch, 1, -1, c.precision);
    const bool such =
        both.fits() && one.fits() && !both.tiling().tensor_cores && one.tiling().tensor_cores;
    if (h100_sized) EXPECT_TRUE(such) << both.describe() << "\n" << one.describe();
    // Fewer or smaller SMs may fit neither form of the case.
    if (!such) continue;
    ++checked;
    EXPECT_TRUE(directions_in_turn_faster(both, one));
    const PersistentRnnPlan both1(c.hidden, 1, 2, -1, c.precision);
    const PersistentRnnPlan one1(c.hidden, 1, 1, -1, c.precision);
    if (both1.fits() && one1.fits()) EXPECT_FALSE(directions_in_turn_faster(both1, one1));
  }
  if (checked == 0) GTEST_SKIP() << "no case has a two-direction plan off the tensor cores here";
  for (const Precision p : {Precision::kFp32, Precision::kBf16}) {
    const PersistentRnnPlan both(1024, 16, 2, -1, p), one(1024, 16, 1, -1, p);
    if (both.fits() && both.tiling().tensor_cores)
      EXPECT_FALSE(directions_in_turn_faster(both, one));
  }
  CudaContext ctx;
  check_layer(ctx, true, false, 2112, {12, 2, 16}, {12, 7}, false, 80,
              "one direction after the other");
  check_layer(ctx, true, false, 2112, {12, 1, 16}, {9}, false, 81, "persistent recurrence (");
}

// A fresh one-direction clipped-ReLU layer of H through a training forward and backward at each
// of `batches` (ctx in `precision`): the GEMM recurrence past batch `last_persistent`, saying
// "GEMM recurrence (<precision> at batch B" and `why`, the persistent recurrence up to it.
void expect_gemm_past(Precision precision, int H, std::initializer_list<int> batches,
                      int last_persistent, const std::string& why) {
  const int in = 16, T = 5;
  CudaContext ctx;
  ctx.set_matmul_precision(precision);
  Rng rng(66);
  RnnLayerPair layer(ctx, rng, "rnn", in, H, RnnType::kRelu, /*bidirectional=*/false);
  CudaRnnLayer& gpu = layer.gpu;
  for (const int batch : batches) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const bool gemm = batch > last_persistent;
    const std::vector<int> lengths(batch, T);
    DeviceSequences xd, yd, dyd, dxd;
    upload(random_sequences({T, batch, in}, lengths, rng), xd, ctx.stream());
    upload(random_sequences({T, batch, H}, lengths, rng), dyd, ctx.stream());
    yd.data.resize({T, batch, H});
    gpu.forward(xd, yd, true);
    EXPECT_EQ(gpu.ran_persistent(), !gemm) << gpu.recurrence_path();
    gpu.backward(xd, yd, dyd, dxd);
    DS2_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
    EXPECT_EQ(gpu.ran_persistent(), !gemm) << gpu.recurrence_path();
    if (gemm)
      EXPECT_NE(
          gpu.recurrence_path().find("GEMM recurrence (" + std::string(precision_name(precision)) +
                                     " at batch " + std::to_string(batch) + why),
          std::string::npos)
          << gpu.recurrence_path();
  }
}

// fp32 clipped-ReLU layers on the fp32-math kernel take the GEMM recurrence where it is faster
// (nn/cuda/recurrence_choice.h, relu_fp32_math_on_gemm): one direction of H 512 past batch 44 and
// of H 768 past 56, and stay persistent up to there and on the fp16 split (batch 32).
TEST(PersistentRnn, Fp32LayersOffTheTensorCoresTakeTheGemmRecurrencePastTheirBatch) {
  DS2_REQUIRE_GPU();
  const PersistentRnnPlan wide(512, 48, 1), narrow(512, 32, 1), wider(768, 56, 1);
  if (!wide.fits() || wide.tiling().tensor_cores || !narrow.tiling().tensor_cores)
    GTEST_SKIP() << "H 512 batch 48 is not an fp32-math plan here: " << wide.describe();
  expect_gemm_past(Precision::kFp32, 512, {48, 44, 32, 45}, 44,
                   " with the persistent RNN off the tensor cores");
  if (!wider.fits() || wider.tiling().tensor_cores)
    GTEST_SKIP() << "H 768 batch 56 is not an fp32-math plan here: " << wider.describe();
  expect_gemm_past(Precision::kFp32, 768, {64, 56, 57}, 56,
                   " with the persistent RNN off the tensor cores");
}

// One-direction bf16 clipped-ReLU layers on tensor cores at H 2304-4096 take the GEMM recurrence
// at large batch (relu_bf16_tensor_on_gemm): H 2816 at batch 64 and 41, persistent at 40; H 3328
// at 48 and 33, persistent at 32.
TEST(PersistentRnn, Bf16LayersOfH2304To4096TakeTheGemmRecurrenceAtLargeBatch) {
  DS2_REQUIRE_GPU();
  const PersistentRnnPlan plan(2816, 64, 1, -1, Precision::kBf16);
  if (!plan.fits() || !plan.tiling().tensor_cores)
    GTEST_SKIP() << "H 2816 batch 64 is not on bf16 tensor cores here: " << plan.describe();
  expect_gemm_past(Precision::kBf16, 2816, {64, 40, 41}, 40, " and hidden 2816 on tensor cores");
  const PersistentRnnPlan wider(3328, 48, 1, -1, Precision::kBf16);
  if (!wider.fits() || !wider.tiling().tensor_cores)
    GTEST_SKIP() << "H 3328 batch 48 is not on bf16 tensor cores here: " << wider.describe();
  expect_gemm_past(Precision::kBf16, 3328, {48, 32, 33}, 32, " and hidden 3328 on tensor cores");
}

// Small bf16 layers (batch <= 8) run the tensor-core kernel with the tagged exchange inside
// CudaRnnLayer (the cluster kernel's plan, which needs no workspace, once read as "does not run"
// and silently sent every such layer to the GEMM recurrence). Forward, then backward twice from
// the same forward states (persistent kernel, GEMM recurrence); bf16 on both sides, so the
// comparison is by relative error of whole tensors.
TEST(PersistentRnn, Bf16LayersRunTheTensorCoreKernel) {
  DS2_REQUIRE_GPU();
  const auto relative = [](const Tensor& ref, const Tensor& got) {
    return relative_error(ref.data(), got.data(), ref.numel());
  };
  for (const bool bidirectional : {false, true}) {
    SCOPED_TRACE(bidirectional ? "bi" : "uni");
    CudaContext ctx;
    ctx.set_matmul_precision(Precision::kBf16);
    const int T = 40, B = 3, in = 24, H = 96;
    const std::vector<int> lengths = {40, 0, 23};
    Rng rng(bidirectional ? 61 : 60);
    RnnLayerPair layer(ctx, rng, "rnn", in, H, RnnType::kRelu, bidirectional);
    CudaRnnLayer& gpu = layer.gpu;
    DeviceParameters& params = layer.params;
    DeviceSequences xd, dyd, yd[2], dxd;
    upload(random_sequences({T, B, in}, lengths, rng), xd, ctx.stream());
    upload(random_sequences({T, B, H}, lengths, rng), dyd, ctx.stream());
    Tensor y[2], dx[2], grads[2];
    for (int persistent = 1; persistent >= 0; --persistent) {
      gpu.set_use_persistent(persistent == 1);
      yd[persistent].data.resize({T, B, H});
      poison(yd[persistent].data, ctx);
      gpu.forward(xd, yd[persistent], true);
      EXPECT_EQ(gpu.ran_persistent(), persistent == 1);
      y[persistent] = download_tensor(yd[persistent].data, ctx);
    }
    EXPECT_NE(gpu.recurrence_path().find("tagged exchange"), std::string::npos)
        << gpu.recurrence_path();
    EXPECT_LT(relative(y[0], y[1]), 1e-2) << "forward, persistent kernel vs GEMM recurrence";
    EXPECT_EQ(nonzero_padding(y[1], lengths), 0);
    for (int persistent = 1; persistent >= 0; --persistent) {
      gpu.set_use_persistent(true);
      gpu.forward(xd, yd[1], true);  // both backward passes from the persistent kernel's states
      gpu.set_use_persistent(persistent == 1);
      params.zero_grads();
      dxd.data.resize({T, B, in});
      poison(dxd.data, ctx);
      gpu.backward(xd, yd[1], dyd, dxd);
      EXPECT_EQ(gpu.ran_persistent(), persistent == 1);
      dx[persistent] = download_tensor(dxd.data, ctx);
      params.download_grads(grads[persistent]);
    }
    EXPECT_LT(relative(dx[0], dx[1]), 2e-2) << "dx";
    EXPECT_EQ(nonzero_padding(dx[1], lengths), 0);
    EXPECT_LT(relative(grads[0], grads[1]), 2e-2) << "parameter gradients";
  }
}

}  // namespace
}  // namespace ds2
