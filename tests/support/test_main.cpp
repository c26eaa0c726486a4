// ds2_tests' main: the tests run on the OpenBLAS kernels ds2 itself would run
// (core/blas_kernels.h), then GoogleTest as its own main would.
#include <gtest/gtest.h>

#include "core/blas_kernels.h"

int main(int argc, char** argv) {
  ds2::rerun_with_better_blas_kernels(argv);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
