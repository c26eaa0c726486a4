// kernels/few_rows_gemm.h against its CPU reference (core/blas.h's gemm on the bf16 operands
// widened to fp32): fresh random operands, C poisoned outside the rows and columns written (and
// inside where beta = 0, which must not read it), one to 16 rows, odd widths, one and several
// K splits, C with a leading dimension wider than n, repeated calls on one workspace (the
// counters must come back to zero), and the transposed rounding.
#include "kernels/few_rows_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/blas.h"
#include "core/cuda/check.h"
#include "core/cuda/device_array.h"
#include "support/cuda_compare.h"

namespace ds2 {
namespace {

struct Shape {
  int m, n, k;
  float beta;
};

std::vector<uint16_t> random_bf16(int64_t count, Rng& rng, float lo, float hi) {
  std::vector<uint16_t> v(count);
  for (auto& x : v) x = float_to_bf16(rng.uniform(lo, hi));
  return v;
}

std::vector<float> widened(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_float(v[i]);
  return out;
}

template <class T>
void to_device(const std::vector<T>& host, DeviceArray<T>& dev, cudaStream_t s) {
  dev.reserve(static_cast<int64_t>(host.size()));
  DS2_CUDA_CHECK(
      cudaMemcpyAsync(dev.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, s));
}

TEST(FewRowsGemm, MatchesCpuGemmOnBf16Operands) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  cudaStream_t s = ctx.stream();
  int sm_count = 0;
  DS2_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0));
  const Shape shapes[] = {{1, 8, 8, 0.0f},       {1, 37, 40, 1.0f},      {3, 129, 200, 0.0f},
                          {4, 1000, 1000, 1.0f}, {5, 63, 1536, 0.5f},    {8, 520, 3 * 520, 1.0f},
                          {9, 1560, 520, 0.0f},  {16, 3328, 3328, 1.0f}, {11, 700, 4096, 0.0f},
                          {13, 2048, 512, 1.0f}, {15, 96, 2056, 0.0f},   {16, 3072, 3072, 1.0f}};
  Rng rng(5801);
  DeviceArray<float> workspace;
  DeviceArray<int> counters;
  for (const Shape& sh : shapes) {
    const kernels::FewRowsGemm g(sh.m, sh.n, sh.k, sm_count);
    SCOPED_TRACE("m " + std::to_string(sh.m) + " n " + std::to_string(sh.n) + " k " +
                 std::to_string(sh.k) + " beta " + std::to_string(sh.beta) + ", " +
                 std::to_string(g.splits) + " splits");
    const int lda = sh.k + 8, ldc = sh.n + 3;
    const std::vector<uint16_t> a = random_bf16(int64_t{sh.m} * lda, rng, -1.0f, 1.0f);
    const std::vector<uint16_t> w = random_bf16(int64_t{sh.n} * sh.k, rng, -1.0f, 1.0f);
    // Rows of C past m, and columns past n, hold values the kernel must leave alone.
    const int rows_c = sh.m + 2;
    std::vector<float> c0(int64_t{rows_c} * ldc);
    for (auto& v : c0) v = rng.uniform(-1.0f, 1.0f);
    std::vector<float> ref = c0;
    gemm(false, true, sh.m, sh.n, sh.k, 1.0f, widened(a).data(), lda, widened(w).data(), sh.k,
         sh.beta, ref.data(), ldc);

    DeviceArray<uint16_t> da, dw;
    DeviceArray<float> dc;
    to_device(a, da, s);
    to_device(w, dw, s);
    std::vector<float> c_in = c0;
    if (sh.beta == 0.0f)  // beta 0 must not read C: NaN where it writes
      for (int i = 0; i < sh.m; ++i)
        for (int j = 0; j < sh.n; ++j) c_in[int64_t{i} * ldc + j] = std::nanf("");
    to_device(c_in, dc, s);
    ASSERT_TRUE(g.supported(da.data(), lda, dw.data()));
    if (workspace.capacity() < g.workspace_floats()) {
      workspace.reserve(g.workspace_floats());
    }
    poison(workspace.data(), workspace.capacity(), ctx);
    if (counters.capacity() < g.counters()) {
      counters.reserve(g.counters());
      DS2_CUDA_CHECK(cudaMemsetAsync(counters.data(), 0, sizeof(int) * counters.capacity(), s));
    }
    // Twice from the same C: the second call finds the counters the first left.
    DeviceArray<float> dc2;
    to_device(c_in, dc2, s);
    kernels::few_rows_gemm_bf16(g, da.data(), lda, dw.data(), sh.beta, dc.data(), ldc,
                                workspace.data(), counters.data(), s);
    kernels::few_rows_gemm_bf16(g, da.data(), lda, dw.data(), sh.beta, dc2.data(), ldc,
                                workspace.data(), counters.data(), s);
    std::vector<float> got(c0.size()), got2(c0.size());
    download(dc.data(), static_cast<int64_t>(got.size()), got.data(), s);
    download(dc2.data(), static_cast<int64_t>(got2.size()), got2.data(), s);
    // fp32 sums of k products of magnitude <= 1: order differences stay near k * 2^-24.
    const double atol = 1e-6 * sh.k;
    for (int i = 0; i < rows_c; ++i)
      for (int j = 0; j < ldc; ++j) {
        const int64_t idx = int64_t{i} * ldc + j;
        if (i < sh.m && j < sh.n) {
          ASSERT_NEAR(ref[idx], got[idx], atol + 1e-5 * std::fabs(ref[idx])) << i << ", " << j;
          ASSERT_EQ(got[idx], got2[idx]) << "not deterministic at " << i << ", " << j;
        } else {
          ASSERT_EQ(c0[idx], got[idx]) << "wrote outside C at " << i << ", " << j;
        }
      }
  }
}

TEST(FewRowsGemm, RefusesWhatItDoesNotTake) {
  DS2_REQUIRE_GPU();
  DeviceArray<uint16_t> buf(1024);
  const kernels::FewRowsGemm g(4, 64, 37, 132);
  EXPECT_FALSE(g.supported(buf.data(), 40, buf.data()));  // k not a multiple of 8
  const kernels::FewRowsGemm wide(kernels::kFewRowsMax + 1, 64, 64, 132);
  EXPECT_FALSE(wide.supported(buf.data(), 64, buf.data()));  // too many rows
  const kernels::FewRowsGemm ok(kernels::kFewRowsMax, 64, 64, 132);
  EXPECT_TRUE(ok.supported(buf.data(), 64, buf.data()));
  EXPECT_FALSE(ok.supported(buf.data() + 1, 64, buf.data()));  // A not 16-byte aligned
  EXPECT_FALSE(ok.supported(buf.data(), 60, buf.data()));      // lda not a multiple of 8
}

TEST(FewRowsGemm, TransposedRoundingMatchesCpu) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  cudaStream_t s = ctx.stream();
  Rng rng(5802);
  for (const auto& [rows, cols] :
       {std::pair{1, 1}, std::pair{37, 5}, std::pair{96, 3 * 96}, std::pair{1000, 333}}) {
    std::vector<float> x(int64_t{rows} * cols);
    for (auto& v : x) v = rng.uniform(-3.0f, 3.0f);
    DeviceArray<float> dx;
    to_device(x, dx, s);
    DeviceArray<uint16_t> dy(int64_t{rows} * cols);
    DS2_CUDA_CHECK(cudaMemsetAsync(dy.data(), 0xFF, sizeof(uint16_t) * rows * cols, s));
    kernels::to_bf16_transposed(dx.data(), rows, cols, dy.data(), s);
    std::vector<uint16_t> y(int64_t{rows} * cols);
    DS2_CUDA_CHECK(cudaMemcpyAsync(y.data(), dy.data(), y.size() * sizeof(uint16_t),
                                   cudaMemcpyDeviceToHost, s));
    DS2_CUDA_CHECK(cudaStreamSynchronize(s));
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c)
        ASSERT_EQ(y[int64_t{c} * rows + r], float_to_bf16(x[int64_t{r} * cols + c]))
            << rows << "x" << cols << " at " << r << ", " << c;
  }
}

}  // namespace
}  // namespace ds2
