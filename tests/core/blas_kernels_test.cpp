// core/blas_kernels.h: which OpenBLAS kernels a CPU should run, and that this process runs them.
#include "core/blas_kernels.h"

#include <gtest/gtest.h>

#include <string>

namespace ds2 {
namespace {

TEST(BlasKernels, WiderCoreOnlyWhereOpenBlasPickedNarrowerVectors) {
  // A hypervisor that hides the CPU model leaves OpenBLAS on Prescott's SSE3 kernels.
  EXPECT_EQ(wider_openblas_core("Prescott", "avx512"), "SkylakeX");
  EXPECT_EQ(wider_openblas_core("Prescott", "avx2"), "Haswell");
  EXPECT_EQ(wider_openblas_core("Nehalem", "avx"), "Sandybridge");
  EXPECT_EQ(wider_openblas_core("Sandybridge", "avx512"), "SkylakeX");
  EXPECT_EQ(wider_openblas_core("haswell", "avx512"), "SkylakeX");  // OpenBLAS's case varies
  // Its own pick as wide as the CPU, or wider than the CPU: left alone.
  EXPECT_EQ(wider_openblas_core("SkylakeX", "avx512"), "");
  EXPECT_EQ(wider_openblas_core("Cooperlake", "avx512"), "");
  EXPECT_EQ(wider_openblas_core("SapphireRapids", "avx512"), "");
  EXPECT_EQ(wider_openblas_core("Zen", "avx2"), "");
  EXPECT_EQ(wider_openblas_core("Haswell", "avx"), "");
  EXPECT_EQ(wider_openblas_core("Prescott", "sse"), "");
  // Names this table does not know (a newer OpenBLAS's) are left to OpenBLAS.
  EXPECT_EQ(wider_openblas_core("Zen5", "avx512"), "");
  EXPECT_EQ(wider_openblas_core("Prescott", ""), "");  // off x86
  EXPECT_EQ(wider_openblas_core("ARMV8", ""), "");
}

// ds2_tests' main (tests/support/test_main.cpp) reruns itself as ds2's does: this process runs
// kernels as wide as the CPU's vectors, whatever OpenBLAS picked on its own.
TEST(BlasKernels, ThisProcessRunsKernelsAsWideAsTheCpu) {
  const std::string core = openblas_core(), isa = cpu_vector_isa();
  SCOPED_TRACE(blas_kernels() + " on a CPU with " + isa);
  EXPECT_FALSE(core.empty());
  EXPECT_EQ(wider_openblas_core(core, isa), "");
}

}  // namespace
}  // namespace ds2
