// CPU reference vs CUDA for the GEMM recurrence's step kernels (kernels/rnn.h) at their padded
// layouts: each value where the CPU formula puts it (the CPU layer's clipped ReLU and GRU cell),
// the padding columns 0 over poison, invalid rows 0, and the hidden gates and carry read at their
// padded pitch (their padding holds NaN, which a wrong pitch would read). H 3 pads to 8 (the
// padding wider than the row), H 37 to 40 (3H 111 to 112), H 8 not at all; batch 3 with one row
// invalid at t, and batch 1. Each kernel also prefetches "the next step's" inputs, pointed at its
// own (what it reads, at the same extents), which must change nothing.
#include "kernels/rnn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/cuda/check.h"
#include "core/cuda/device_array.h"
#include "core/gru_cell_backward.h"
#include "support/cuda_compare.h"
#include "support/cuda_rnn_reference.h"
#include "support/device_vectors.h"

namespace ds2 {
namespace {

constexpr uint16_t kPoison16 = 0xFFFF;  // a bf16 NaN
constexpr int kT = 2;                   // the timestep run; row b is valid when kT < lengths[b]
constexpr float kClip = 20.0f;

struct Shape {
  int B, H;
};
const Shape kShapes[] = {{3, 3}, {3, 37}, {3, 8}, {1, 37}};

std::vector<int> lengths_for(int B) {
  return B == 1 ? std::vector<int>{5} : std::vector<int>{5, 1, 3};  // row 1 invalid at kT
}

// Rows of `cols` values `ld` apart, the padding NaN.
std::vector<float> padded_rows(int rows, int cols, int ld, Rng& rng, float lo, float hi) {
  std::vector<float> v(static_cast<size_t>(rows) * ld, std::nanf(""));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) v[static_cast<size_t>(r) * ld + c] = rng.uniform(lo, hi);
  return v;
}

template <class T>
DeviceArray<T> filled(int64_t n, T value, cudaStream_t s) {
  return to_device(std::vector<T>(n, value), s);
}

// x's rows (`ld` apart) hold `want` rounded to bf16 in their first `cols` columns and 0 after.
void expect_bf16_rows(const std::vector<uint16_t>& x, const std::vector<float>& want, int rows,
                      int cols, int ld, const std::string& what) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < ld; ++c) {
      const uint16_t expected =
          c < cols ? float_to_bf16(want[static_cast<size_t>(r) * cols + c]) : uint16_t{0};
      ASSERT_EQ(x[static_cast<size_t>(r) * ld + c], expected)
          << what << ", row " << r << " column " << c << " of " << cols << " (ld " << ld << ")";
    }
}

// Each row's padding columns [cols, ld) are exactly 0.
void expect_zero_padding(const std::vector<float>& x, int rows, int cols, int ld,
                         const std::string& what) {
  for (int r = 0; r < rows; ++r)
    for (int c = cols; c < ld; ++c)
      ASSERT_EQ(x[static_cast<size_t>(r) * ld + c], 0.0f)
          << what << ", row " << r << " column " << c;
}

std::string shape_name(const Shape& s) {
  return "B " + std::to_string(s.B) + " H " + std::to_string(s.H);
}

TEST(RnnStepKernels, ReluForwardMatchesCpuWithPaddedBf16Rows) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  cudaStream_t s = ctx.stream();
  // Without a product (pre holds U h_prev) and with one (a padded GEMM wrote it apart).
  for (const bool with_product : {false, true})
    for (const Shape& sh : kShapes) {
      SCOPED_TRACE(shape_name(sh) + (with_product ? " with a product" : ""));
      const int B = sh.B, H = sh.H, ld_pre = H + 5, ld_product = H + 3;
      const int ld16 = kernels::rnn_padded_ld(H);
      Rng rng(B * 100 + H + (with_product ? 7 : 0));
      const std::vector<int> len = lengths_for(B);
      const std::vector<float> pre = random_vector(int64_t{B} * ld_pre, rng, -5.0f, 25.0f);
      const std::vector<float> product = random_vector(int64_t{B} * ld_product, rng, -8.0f, 8.0f);
      std::vector<float> want(static_cast<size_t>(B) * H);
      for (int b = 0; b < B; ++b)
        for (int k = 0; k < H; ++k) {
          const float sum = with_product ? pre[b * ld_pre + k] + product[b * ld_product + k]
                                         : pre[b * ld_pre + k];
          want[b * H + k] = kT < len[b] ? std::fmin(std::fmax(sum, 0.0f), kClip) : 0;
        }
      auto pre_d = to_device(pre, s);
      auto product_d = to_device(product, s);
      auto len_d = to_device(len, s);
      auto h = filled<float>(int64_t{B} * H, std::nanf(""), s);
      auto h16 = filled<uint16_t>(int64_t{B} * ld16, kPoison16, s);
      kernels::rnn_relu_step_forward(
          pre_d.data(), ld_pre, with_product ? product_d.data() : nullptr, ld_product, h.data(),
          h16.data(), B, H, kT, len_d.data(), kClip, {pre_d.data()}, s);
      DS2_CUDA_CHECK(cudaGetLastError());
      const std::vector<float> got = to_host(h, s);
      for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "h " << i;
      expect_bf16_rows(to_host(h16, s), want, B, H, ld16, "h_bf16");
    }
}

TEST(RnnStepKernels, GruForwardMatchesCpuReadingPaddedGates) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  cudaStream_t s = ctx.stream();
  for (const Shape& sh : kShapes) {
    SCOPED_TRACE(shape_name(sh));
    const int B = sh.B, H = sh.H, ld_pre = 3 * H + 2, ld16 = kernels::rnn_padded_ld(H);
    const int ld_gates = kernels::rnn_padded_ld(3 * H);
    Rng rng(B * 100 + H + 1);
    const std::vector<int> len = lengths_for(B);
    const std::vector<float> pre = random_vector(int64_t{B} * ld_pre, rng, -2.0f, 2.0f);
    const std::vector<float> gates = padded_rows(B, 3 * H, ld_gates, rng, -2.0f, 2.0f);
    const std::vector<float> bias = random_vector(3 * H, rng, -0.5f, 0.5f);
    const std::vector<float> h_prev = random_vector(int64_t{B} * H, rng, -1.0f, 1.0f);
    // float64 reference of the cell (kernels/gru_cell.cuh's formulas).
    std::vector<float> want_h(static_cast<size_t>(B) * H, 0.0f), want_pre = pre,
                                                                 want_hn(want_h.size(), 0.0f);
    auto sigmoid = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
    for (int b = 0; b < B; ++b) {
      if (kT >= len[b]) continue;
      for (int k = 0; k < H; ++k) {
        const float* a = &pre[b * ld_pre];
        const float* g = &gates[b * ld_gates];
        const double r = sigmoid(double{a[k]} + g[k] + bias[k]);
        const double z = sigmoid(double{a[H + k]} + g[H + k] + bias[H + k]);
        const double hn = double{g[2 * H + k]} + bias[2 * H + k];
        const double n = std::tanh(a[2 * H + k] + r * hn);
        want_h[b * H + k] = static_cast<float>((1.0 - z) * n + z * h_prev[b * H + k]);
        want_hn[b * H + k] = static_cast<float>(hn);
        want_pre[b * ld_pre + k] = static_cast<float>(r);
        want_pre[b * ld_pre + H + k] = static_cast<float>(z);
        want_pre[b * ld_pre + 2 * H + k] = static_cast<float>(n);
      }
    }
    auto pre_d = to_device(pre, s);
    auto gates_d = to_device(gates, s);
    auto bias_d = to_device(bias, s);
    auto h_prev_d = to_device(h_prev, s);
    auto len_d = to_device(len, s);
    auto h = filled<float>(int64_t{B} * H, std::nanf(""), s);
    auto cand = filled<float>(int64_t{B} * H, std::nanf(""), s);
    auto h16 = filled<uint16_t>(int64_t{B} * ld16, kPoison16, s);
    kernels::rnn_gru_step_forward(pre_d.data(), ld_pre, gates_d.data(), bias_d.data(),
                                  h_prev_d.data(), h.data(), h16.data(), cand.data(), B, H, kT,
                                  len_d.data(), {pre_d.data()}, s);
    DS2_CUDA_CHECK(cudaGetLastError());
    const std::vector<float> got_h = to_host(h, s), got_hn = to_host(cand, s),
                             got_pre = to_host(pre_d, s);
    expect_close(want_h.data(), got_h.data(), want_h.size(), 2e-6, 2e-6, "h");
    expect_close(want_pre.data(), got_pre.data(), want_pre.size(), 2e-6, 2e-6, "gates over pre");
    for (int b = 0; b < B; ++b)
      if (kT < len[b])
        expect_close(want_hn.data() + b * H, got_hn.data() + b * H, H, 2e-6, 2e-6, "candidate");
    // The copy is the kernel's own h rounded, at the padded pitch.
    expect_bf16_rows(to_host(h16, s), got_h, B, H, ld16, "h_bf16");
  }
}

TEST(RnnStepKernels, ReluBackwardMatchesCpuWithPaddedCarryAndNext) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  cudaStream_t s = ctx.stream();
  for (const Shape& sh : kShapes) {
    SCOPED_TRACE(shape_name(sh));
    const int B = sh.B, H = sh.H, ld_pre = H + 3, ld = kernels::rnn_padded_ld(H);
    Rng rng(B * 100 + H + 2);
    const std::vector<int> len = lengths_for(B);
    // h outside (0, clip) too, where the mask stops the gradient.
    const std::vector<float> h = random_vector(int64_t{B} * H, rng, -2.0f, 22.0f);
    const std::vector<float> dy = random_vector(int64_t{B} * H, rng, -1.0f, 1.0f);
    const std::vector<float> carry = padded_rows(B, H, ld, rng, -1.0f, 1.0f);
    std::vector<float> want(static_cast<size_t>(B) * H, 0.0f);
    for (int b = 0; b < B; ++b)
      for (int k = 0; k < H; ++k) {
        const float v = h[b * H + k];
        if (kT < len[b] && v > 0.0f && v < kClip)
          want[b * H + k] = dy[b * H + k] + carry[b * ld + k];
      }
    auto h_d = to_device(h, s);
    auto dy_d = to_device(dy, s);
    auto carry_d = to_device(carry, s);
    auto len_d = to_device(len, s);
    auto dpre = filled<float>(int64_t{B} * ld_pre, std::nanf(""), s);
    auto dpre16 = filled<uint16_t>(int64_t{B} * ld, kPoison16, s);
    auto next = filled<float>(int64_t{B} * ld, std::nanf(""), s);
    kernels::rnn_relu_step_backward(h_d.data(), dy_d.data(), carry_d.data(), dpre.data(), ld_pre,
                                    dpre16.data(), next.data(), B, H, kT, len_d.data(), kClip,
                                    {nullptr, h_d.data(), dy_d.data()}, s);
    DS2_CUDA_CHECK(cudaGetLastError());
    const std::vector<float> got = to_host(dpre, s), got_next = to_host(next, s);
    for (int b = 0; b < B; ++b)
      for (int k = 0; k < H; ++k)
        ASSERT_EQ(got[b * ld_pre + k], want[b * H + k]) << "dpre row " << b << " column " << k;
    expect_bf16_rows(to_host(dpre16, s), want, B, H, ld, "dpre_bf16");
    // next: the GEMM fills valid rows' values; the kernel zeroes invalid rows and every padding.
    expect_zero_padding(got_next, B, H, ld, "next");
    for (int b = 0; b < B; ++b)
      if (kT >= len[b])
        for (int k = 0; k < H; ++k) ASSERT_EQ(got_next[b * ld + k], 0.0f) << "invalid row " << b;
  }
}

TEST(RnnStepKernels, GruBackwardMatchesCpuWithPaddedRows) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  cudaStream_t s = ctx.stream();
  for (const Shape& sh : kShapes) {
    SCOPED_TRACE(shape_name(sh));
    const int B = sh.B, H = sh.H, GH = 3 * H, ld_pre = GH + 2, ld = kernels::rnn_padded_ld(H);
    const int ld_gates = kernels::rnn_padded_ld(GH);
    Rng rng(B * 100 + H + 3);
    const std::vector<int> len = lengths_for(B);
    // r, z in (0, 1) and n in (-1, 1), as the forward leaves them.
    std::vector<float> gates = random_vector(int64_t{B} * ld_pre, rng, 0.05f, 0.95f);
    for (int b = 0; b < B; ++b)
      for (int k = 0; k < H; ++k) gates[b * ld_pre + 2 * H + k] = rng.uniform(-0.95f, 0.95f);
    const std::vector<float> hn = random_vector(int64_t{B} * H, rng, -1.0f, 1.0f);
    const std::vector<float> h_prev = random_vector(int64_t{B} * H, rng, -1.0f, 1.0f);
    const std::vector<float> dy = random_vector(int64_t{B} * H, rng, -1.0f, 1.0f);
    const std::vector<float> carry = padded_rows(B, H, ld, rng, -1.0f, 1.0f);
    // The CPU layer's cell backward (core/gru_cell_backward.h); invalid rows all 0.
    std::vector<float> want_dpre(static_cast<size_t>(B) * GH, 0.0f),
        want_dg(want_dpre.size(), 0.0f), want_next(static_cast<size_t>(B) * H, 0.0f);
    for (int b = 0; b < B; ++b) {
      if (kT >= len[b]) continue;
      for (int k = 0; k < H; ++k) {
        const float* p = &gates[b * ld_pre];
        const GruGrads c = gru_cell_backward(dy[b * H + k] + carry[b * ld + k], p[k], p[H + k],
                                             p[2 * H + k], hn[b * H + k], h_prev[b * H + k]);
        store_gate_grads(c, &want_dpre[b * GH + k], &want_dg[b * GH + k], H);
        want_next[b * H + k] = c.dh_prev;
      }
    }
    auto gates_d = to_device(gates, s);
    auto hn_d = to_device(hn, s);
    auto h_prev_d = to_device(h_prev, s);
    auto dy_d = to_device(dy, s);
    auto carry_d = to_device(carry, s);
    auto len_d = to_device(len, s);
    auto dpre = filled<float>(int64_t{B} * ld_pre, std::nanf(""), s);
    auto dg = filled<float>(int64_t{B} * GH, std::nanf(""), s);
    auto dg16 = filled<uint16_t>(int64_t{B} * ld_gates, kPoison16, s);
    auto next = filled<float>(int64_t{B} * ld, std::nanf(""), s);
    kernels::rnn_gru_step_backward(gates_d.data(), ld_pre, hn_d.data(), h_prev_d.data(),
                                   dy_d.data(), carry_d.data(), dpre.data(), dg.data(), dg16.data(),
                                   next.data(), B, H, kT, len_d.data(),
                                   {gates_d.data(), h_prev_d.data(), dy_d.data(), hn_d.data()}, s);
    DS2_CUDA_CHECK(cudaGetLastError());
    const std::vector<float> got_dpre = to_host(dpre, s), got_dg = to_host(dg, s),
                             got_next = to_host(next, s);
    std::vector<float> dpre_rows(want_dpre.size()), next_rows(want_next.size());
    for (int b = 0; b < B; ++b) {
      for (int c = 0; c < GH; ++c) dpre_rows[b * GH + c] = got_dpre[b * ld_pre + c];
      for (int k = 0; k < H; ++k) next_rows[b * H + k] = got_next[b * ld + k];
    }
    expect_close(want_dpre.data(), dpre_rows.data(), want_dpre.size(), 1e-6, 1e-6, "dpre");
    expect_close(want_dg.data(), got_dg.data(), want_dg.size(), 1e-6, 1e-6, "dgates");
    expect_close(want_next.data(), next_rows.data(), want_next.size(), 1e-6, 1e-6, "next");
    expect_zero_padding(got_next, B, H, ld, "next");
    // The copy is the kernel's own dgates rounded, at the padded pitch.
    expect_bf16_rows(to_host(dg16, s), got_dg, B, GH, ld_gates, "dgates_bf16");
  }
}

}  // namespace
}  // namespace ds2
