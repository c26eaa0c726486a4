#include "core/blas.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu_threads.h"
#include "core/rng.h"

namespace ds2 {
namespace {

// C = alpha op(A) op(B) + beta C in double, row-major, as gemm's contract says.
std::vector<double> reference(bool ta, bool tb, int m, int n, int k, float alpha,
                              const std::vector<float>& a, int lda, const std::vector<float>& b,
                              int ldb, float beta, const std::vector<float>& c, int ldc) {
  std::vector<double> out(c.begin(), c.end());
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int p = 0; p < k; ++p) {
        const double av =
            ta ? a[static_cast<size_t>(p) * lda + i] : a[static_cast<size_t>(i) * lda + p];
        const double bv =
            tb ? b[static_cast<size_t>(j) * ldb + p] : b[static_cast<size_t>(p) * ldb + j];
        sum += av * bv;
      }
      out[static_cast<size_t>(i) * ldc + j] =
          alpha * sum + beta * c[static_cast<size_t>(i) * ldc + j];
    }
  return out;
}

TEST(Gemm, SplitProductsMatchTheReferenceForEveryTransposeAndShape) {
  struct DefaultThreadsAfter {
    ~DefaultThreadsAfter() { set_cpu_threads(0); }
  } restore;
  Rng rng(7);
  struct Shape3 {
    int m, n, k;
  };
  // Above kGemmSplitMinMacs (split by rows, by columns where n > m), odd sizes, and one below.
  const std::vector<Shape3> shapes{{517, 131, 97}, {129, 613, 83}, {1001, 67, 71}, {33, 35, 37}};
  for (const Shape3& s : shapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        SCOPED_TRACE(std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) +
                     (ta ? " A^T" : "") + (tb ? " B^T" : ""));
        // Leading dimensions wider than the matrices, so a block's offset into them shows.
        const int lda = (ta ? s.m : s.k) + 3, ldb = (tb ? s.k : s.n) + 5, ldc = s.n + 2;
        std::vector<float> a(static_cast<size_t>(ta ? s.k : s.m) * lda),
            b(static_cast<size_t>(tb ? s.n : s.k) * ldb), c(static_cast<size_t>(s.m) * ldc);
        for (float& v : a) v = rng.uniform(-1.0f, 1.0f);
        for (float& v : b) v = rng.uniform(-1.0f, 1.0f);
        for (float& v : c) v = rng.uniform(-1.0f, 1.0f);
        const std::vector<double> want =
            reference(ta, tb, s.m, s.n, s.k, 0.5f, a, lda, b, ldb, 0.25f, c, ldc);
        std::vector<std::vector<float>> got;
        for (int threads : {1, 2, 3}) {
          set_cpu_threads(threads);
          std::vector<float> out = c;
          gemm(ta, tb, s.m, s.n, s.k, 0.5f, a.data(), lda, b.data(), ldb, 0.25f, out.data(), ldc);
          for (size_t i = 0; i < out.size(); ++i)
            ASSERT_NEAR(out[i], want[i], 1e-4 * (1.0 + std::fabs(want[i])))
                << "threads " << threads << " element " << i;
          got.push_back(out);
        }
        // Each element still sums over K in one sgemm call, whatever the blocks.
        EXPECT_EQ(got[0], got[1]);
        EXPECT_EQ(got[0], got[2]);
      }
}

}  // namespace
}  // namespace ds2
