// core/blas_kernels.h: which OpenBLAS kernels a CPU should run, and that this process runs them.
#include "core/blas_kernels.h"

#include <gtest/gtest.h>
#include <strings.h>

#include <cstdlib>
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
// kernels as wide as the CPU's vectors, whatever OpenBLAS picked on its own. Where the
// environment set OPENBLAS_CORETYPE itself (some hosts do, on CPUs where older OpenBLAS builds
// fail), ds2 keeps that choice, and the process runs exactly those kernels instead.
TEST(BlasKernels, ThisProcessRunsKernelsAsWideAsTheCpu) {
  const std::string core = openblas_core(), isa = cpu_vector_isa();
  SCOPED_TRACE(blas_kernels() + " on a CPU with " + isa);
  EXPECT_FALSE(core.empty());
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  const char* own = std::getenv("DS2_OPENBLAS_OWN_CORE");  // set by the rerun, not the user
  if (forced && *forced && !(own && *own)) {
    EXPECT_EQ(strcasecmp(core.c_str(), forced), 0)
        << core << " against OPENBLAS_CORETYPE " << forced;
    return;
  }
  EXPECT_EQ(wider_openblas_core(core, isa), "");
}

}  // namespace
}  // namespace ds2
