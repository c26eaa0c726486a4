// CPU reference vs CUDA for the shared elementwise kernels and reductions.
#include "kernels/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/blas.h"
#include "core/cuda/check.h"
#include "core/cuda/gemm.h"
#include "nn/activations.h"
#include "support/cuda_compare.h"
#include "train/pruning.h"

namespace ds2 {
namespace {

class ElementwiseTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(ElementwiseTest, ClippedReluMatchesCpu) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  Rng rng(GetParam());
  const int64_t n = GetParam();
  Tensor x({n});
  fill_uniform(x, rng, -5, 25);
  Tensor y_ref({n}), dy({n}), dx_ref({n});
  fill_uniform(dy, rng);
  clipped_relu(x.data(), y_ref.data(), n, 20.0f);
  clipped_relu_backward(y_ref.data(), dy.data(), dx_ref.data(), n, 20.0f);

  DeviceTensor dxd, dyd, y({n}), dxo({n});
  upload(x, dxd, ctx.stream());
  upload(dy, dyd, ctx.stream());
  poison(y, ctx);
  poison(dxo, ctx);
  kernels::clipped_relu(dxd.data(), y.data(), n, 20.0f, ctx.stream());
  kernels::clipped_relu_backward(y.data(), dyd.data(), dxo.data(), n, 20.0f, ctx.stream());
  expect_close(y_ref, download_tensor(y, ctx), 0, 0, "clipped_relu");
  expect_close(dx_ref, download_tensor(dxo, ctx), 0, 0, "clipped_relu_backward");
}

TEST_P(ElementwiseTest, ReductionsMatchCpu) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  Rng rng(GetParam() + 7);
  const int cols = static_cast<int>(GetParam() % 97) + 1;
  const int64_t rows = GetParam() / cols + 1;
  Tensor x({rows, cols});
  fill_uniform(x, rng);
  Tensor sums({cols});
  double squares = 0;
  for (int c = 0; c < cols; ++c) sums[c] = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      sums[c] += x[r * cols + c];
      squares += static_cast<double>(x[r * cols + c]) * x[r * cols + c];
    }
  DeviceTensor xd, out({cols});
  upload(x, xd, ctx.stream());
  poison(out, ctx);
  kernels::column_sum(xd.data(), rows, cols, out.data(), false, ctx.stream());
  expect_close(sums, download_tensor(out, ctx), 1e-4, 1e-5, "column_sum");
  DeviceArray<double> total(1), scratch(kernels::kSumSquaresPartials);
  kernels::sum_squares(xd.data(), x.numel(), scratch.data(), total.data(), ctx.stream());
  double got = 0;
  // The context's stream does not synchronize with the legacy default stream cudaMemcpy uses.
  DS2_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  DS2_CUDA_CHECK(cudaMemcpy(&got, total.data(), sizeof(double), cudaMemcpyDeviceToHost));
  EXPECT_NEAR(got, squares, 1e-9 * squares + 1e-12);
}

TEST_P(ElementwiseTest, ZeroPaddingClearsOnlyPadding) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  Rng rng(GetParam() + 3);
  const int T = static_cast<int>(GetParam() % 13) + 1, B = 3, F = 5;
  Tensor x({T, B, F});
  fill_uniform(x, rng, 1, 2);  // never zero
  Sequences ref;
  ref.data = x;
  ref.lengths = {T, 0, T / 2};
  zero_padding(ref);
  DeviceSequences d;
  upload(Sequences{x, ref.lengths}, d, ctx.stream());
  zero_padding(d, ctx.stream());
  expect_close(ref.data, download_tensor(d.data, ctx), 0, 0, "zero_padding");
}

// +0.0f takes the driver's memset, any other value (-0.0f included) the kernel; both must write
// exactly [x, x + n) of a poisoned buffer, from an odd offset.
TEST_P(ElementwiseTest, FillWritesExactlyItsRange) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  Rng rng(GetParam() + 5);
  const int64_t n = GetParam();
  Tensor poison({n + 2});
  fill_uniform(poison, rng, 1, 2);  // never zero
  for (float value : {0.0f, -0.0f, 2.5f}) {
    DeviceTensor d;
    upload(poison, d, ctx.stream());
    kernels::fill(d.data() + 1, n, value, ctx.stream());
    const Tensor got = download_tensor(d, ctx);
    EXPECT_EQ(got[0], poison[0]);
    EXPECT_EQ(got[n + 1], poison[n + 1]);
    for (int64_t i = 1; i <= n; ++i) {
      ASSERT_EQ(got[i], value) << "element " << i << " of value " << value;
      ASSERT_EQ(std::signbit(got[i]), std::signbit(value)) << "element " << i;
    }
  }
}

TEST_P(ElementwiseTest, GemmMatchesCblas) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  Rng rng(GetParam() + 11);
  const int m = static_cast<int>(GetParam() % 37) + 1, n = 29, k = 17;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      Tensor a({ta ? k : m, ta ? m : k}), b({tb ? n : k, tb ? k : n}), c({m, n});
      fill_uniform(a, rng);
      fill_uniform(b, rng);
      fill_uniform(c, rng);
      Tensor ref = c;
      gemm(ta, tb, m, n, k, 0.7f, a.data(), ta ? m : k, b.data(), tb ? k : n, 0.5f, ref.data(), n);
      DeviceTensor ad, bd, cd;
      upload(a, ad, ctx.stream());
      upload(b, bd, ctx.stream());
      upload(c, cd, ctx.stream());
      gemm(ctx, ta, tb, m, n, k, 0.7f, ad.data(), ta ? m : k, bd.data(), tb ? k : n, 0.5f,
           cd.data(), n);
      expect_close(ref, download_tensor(cd, ctx), 1e-5, 1e-5,
                   "gemm ta=" + std::to_string(ta) + " tb=" + std::to_string(tb));
    }
}

// Mixed precision: operands rounded to bf16 (by cuBLAS, on tensor cores), fp32 accumulation. The
// reference multiplies the operands rounded the same way in fp32, so the only differences are
// summation order and whether cuBLAS rounded at all (it may keep fp32 for some shapes).
TEST_P(ElementwiseTest, Bf16GemmMatchesRoundedOperands) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  ctx.set_matmul_precision(Precision::kBf16);
  Rng rng(GetParam() + 23);
  const int m = static_cast<int>(GetParam() % 37) + 1, n = 29 + static_cast<int>(GetParam() % 200);
  const int k = 17 + static_cast<int>(GetParam() % 300);
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      Tensor a({ta ? k : m, ta ? m : k}), b({tb ? n : k, tb ? k : n}), c({m, n});
      fill_uniform(a, rng);
      fill_uniform(b, rng);
      fill_uniform(c, rng);
      Tensor ar = a, br = b, ref = c;
      for (int64_t i = 0; i < ar.numel(); ++i)
        ar.data()[i] = bf16_to_float(float_to_bf16(a.data()[i]));
      for (int64_t i = 0; i < br.numel(); ++i)
        br.data()[i] = bf16_to_float(float_to_bf16(b.data()[i]));
      gemm(ta, tb, m, n, k, 0.7f, ar.data(), ta ? m : k, br.data(), tb ? k : n, 0.5f, ref.data(),
           n);
      DeviceTensor ad, bd, cd;
      upload(a, ad, ctx.stream());
      upload(b, bd, ctx.stream());
      upload(c, cd, ctx.stream());
      DeviceTensor c0;
      upload(c, c0, ctx.stream());
      gemm(ctx, ta, tb, m, n, k, 0.7f, ad.data(), ta ? m : k, bd.data(), tb ? k : n, 0.5f,
           cd.data(), n);
      // |a|, |b| <= 1: an unrounded operand is off by at most 2^-9 relative, over k terms.
      const double atol = 1e-4 + 0.7 * 2.0 / 512.0 * std::sqrt(static_cast<double>(k));
      const std::string what = "ta=" + std::to_string(ta) + " tb=" + std::to_string(tb);
      expect_close(ref, download_tensor(cd, ctx), atol, 1e-3, "bf16 gemm " + what);
      // gemm_bf16 on operands rounded by to_bf16: the reference's exact operands, so only the
      // summation order differs.
      DeviceArray<uint16_t> a16(a.numel()), b16(b.numel());
      kernels::to_bf16(ad.data(), a16.data(), a.numel(), ctx.stream());
      kernels::to_bf16(bd.data(), b16.data(), b.numel(), ctx.stream());
      gemm_bf16(ctx.cublas(), ta, tb, m, n, k, 0.7f, a16.data(), ta ? m : k, b16.data(), tb ? k : n,
                0.5f, c0.data(), n);
      // fp32 accumulation of k products of magnitude <= 1 (tensor-core summation order).
      expect_close(ref, download_tensor(c0, ctx), 2e-4 + 2e-6 * k, 1e-4, "gemm_bf16 " + what);
    }
}

TEST_P(ElementwiseTest, Bf16ConversionsMatchCpuBitForBit) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  Rng rng(GetParam() + 11);
  const int64_t n = GetParam();
  Tensor x({n});
  fill_uniform(x, rng, -300, 300);
  if (n > 2) x[1] = 1.0f + 1.0f / 256, x[2] = std::numeric_limits<float>::infinity();  // tie, inf
  std::vector<uint16_t> ref(n);
  Tensor back_ref({n});
  for (int64_t i = 0; i < n; ++i) {
    ref[i] = float_to_bf16(x[i]);
    back_ref[i] = bf16_to_float(ref[i]);
  }
  DeviceTensor xd, back({n});
  upload(x, xd, ctx.stream());
  DeviceArray<uint16_t> packed(n);
  DS2_CUDA_CHECK(cudaMemsetAsync(packed.data(), 0xFF, n * sizeof(uint16_t), ctx.stream()));
  poison(back, ctx);
  kernels::to_bf16(xd.data(), packed.data(), n, ctx.stream());
  kernels::from_bf16(packed.data(), back.data(), n, ctx.stream());
  std::vector<uint16_t> got(n);
  DS2_CUDA_CHECK(cudaMemcpyAsync(got.data(), packed.data(), n * sizeof(uint16_t),
                                 cudaMemcpyDeviceToHost, ctx.stream()));
  ctx.synchronize();
  const Tensor back_got = download_tensor(back, ctx);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(got[i], ref[i]) << "to_bf16, element " << i << " of " << n;
    // Bits, not values: infinities compare equal too.
    ASSERT_EQ(std::memcmp(back_got.data() + i, back_ref.data() + i, sizeof(float)), 0)
        << "from_bf16, element " << i << " of " << n;
  }
  // From a source one float past a 16-byte boundary: to_bf16 falls back to one at a time.
  if (n < 2) return;
  DS2_CUDA_CHECK(cudaMemsetAsync(packed.data(), 0xFF, n * sizeof(uint16_t), ctx.stream()));
  kernels::to_bf16(xd.data() + 1, packed.data() + 1, n - 1, ctx.stream());
  DS2_CUDA_CHECK(cudaMemcpyAsync(got.data(), packed.data(), n * sizeof(uint16_t),
                                 cudaMemcpyDeviceToHost, ctx.stream()));
  ctx.synchronize();
  EXPECT_EQ(got[0], 0xFFFF) << "to_bf16 wrote before its output";
  for (int64_t i = 1; i < n; ++i) ASSERT_EQ(got[i], ref[i]) << "misaligned to_bf16, element " << i;
}

// The pruning mask: kept elements bit for bit, masked ones exactly 0 (NaN inputs included), both
// out of place (poisoned output) and in place.
TEST_P(ElementwiseTest, ApplyMaskMatchesCpu) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  Rng rng(GetParam() + 23);
  const int64_t n = GetParam();
  Tensor x({n});
  fill_uniform(x, rng, -3, 3);
  if (n > 1) x[0] = std::nanf("");
  std::vector<uint8_t> mask(n);
  for (int64_t i = 0; i < n; ++i) mask[i] = rng.uniform(0.0f, 1.0f) < 0.3f ? 1 : 0;
  if (n > 1) mask[0] = 0;  // a masked NaN
  Tensor ref = x;
  apply_weight_masks({{"m", 0, n, mask.data()}}, ref.data());

  DeviceTensor xd, y({n});
  upload(x, xd, ctx.stream());
  DeviceArray<uint8_t> maskd(n);
  DS2_CUDA_CHECK(
      cudaMemcpyAsync(maskd.data(), mask.data(), n, cudaMemcpyHostToDevice, ctx.stream()));
  poison(y, ctx);
  kernels::apply_mask(xd.data(), maskd.data(), y.data(), n, ctx.stream());
  kernels::apply_mask(xd.data(), maskd.data(), xd.data(), n, ctx.stream());
  const Tensor got = download_tensor(y, ctx), in_place = download_tensor(xd, ctx);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(std::memcmp(got.data() + i, ref.data() + i, sizeof(float)), 0)
        << "apply_mask, element " << i << " of " << n;
    ASSERT_EQ(std::memcmp(in_place.data() + i, ref.data() + i, sizeof(float)), 0)
        << "apply_mask in place, element " << i << " of " << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, ElementwiseTest, ::testing::Values(1, 31, 1000, 65537));

// Rows rounded at a wider pitch: every element as to_bf16 rounds it, the padding exactly 0 (over
// a poisoned output), and nothing written past the last row; at an equal pitch, the plain path.
TEST(ElementwiseRows, Bf16RowsMatchCpuBitForBitWithZeroPadding) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  struct Shape {
    int64_t rows;
    int cols, ld;
  };
  for (const Shape sh : {Shape{1, 1, 8}, Shape{3, 37, 40}, Shape{5, 1700, 1704}, Shape{7, 13, 13},
                         Shape{2, 3, 16}, Shape{1, 1, 1}}) {
    Rng rng(sh.rows * 1000 + sh.cols);
    Tensor x({sh.rows * sh.cols});
    fill_uniform(x, rng, -40, 40);
    const int64_t n = sh.rows * sh.ld, guard = 8;
    DeviceTensor xd;
    upload(x, xd, ctx.stream());
    DeviceArray<uint16_t> y(n + guard);
    DS2_CUDA_CHECK(cudaMemsetAsync(y.data(), 0xFF, (n + guard) * sizeof(uint16_t), ctx.stream()));
    kernels::to_bf16_rows(xd.data(), sh.rows, sh.cols, y.data(), sh.ld, ctx.stream());
    std::vector<uint16_t> got(n + guard);
    DS2_CUDA_CHECK(cudaMemcpyAsync(got.data(), y.data(), got.size() * sizeof(uint16_t),
                                   cudaMemcpyDeviceToHost, ctx.stream()));
    ctx.synchronize();
    const std::string where = std::to_string(sh.rows) + "x" + std::to_string(sh.cols) + " at " +
                              std::to_string(sh.ld) + ", ";
    for (int64_t r = 0; r < sh.rows; ++r)
      for (int c = 0; c < sh.ld; ++c) {
        const uint16_t want = c < sh.cols ? float_to_bf16(x[r * sh.cols + c]) : 0;
        ASSERT_EQ(got[r * sh.ld + c], want) << where << "row " << r << " column " << c;
      }
    for (int64_t i = n; i < n + guard; ++i) ASSERT_EQ(got[i], 0xFFFF) << where << "wrote past rows";
  }
}

// A padded result added into its unpadded place: y's columns < cols become y + x exactly, its
// padding columns and x untouched.
TEST(ElementwiseRows, AddRowsMatchesCpuAndLeavesPaddingAlone) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  struct Shape {
    int64_t rows;
    int cols, ld_y, ld_x;
  };
  for (const Shape sh : {Shape{1, 1, 1, 8}, Shape{3, 37, 40, 41}, Shape{5, 1700, 1700, 1704},
                         Shape{7, 13, 16, 13}}) {
    Rng rng(sh.rows * 100 + sh.cols);
    Tensor y({sh.rows * sh.ld_y}), x({sh.rows * sh.ld_x});
    fill_uniform(y, rng, -3, 3);
    fill_uniform(x, rng, -3, 3);
    DeviceTensor yd, xd;
    upload(y, yd, ctx.stream());
    upload(x, xd, ctx.stream());
    kernels::add_rows(yd.data(), sh.ld_y, xd.data(), sh.ld_x, sh.rows, sh.cols, ctx.stream());
    const Tensor got = download_tensor(yd, ctx), x_after = download_tensor(xd, ctx);
    for (int64_t r = 0; r < sh.rows; ++r)
      for (int c = 0; c < sh.ld_y; ++c) {
        const int64_t i = r * sh.ld_y + c;
        const float want = c < sh.cols ? y[i] + x[r * sh.ld_x + c] : y[i];
        ASSERT_EQ(got[i], want) << "row " << r << " column " << c << " of " << sh.cols;
      }
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(x_after[i], x[i]) << "x changed at " << i;
  }
}

}  // namespace
}  // namespace ds2
