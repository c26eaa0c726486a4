// Helpers for backend-consistency tests (CPU reference vs CUDA): fresh random inputs, poisoned
// outputs so an element the kernel forgot to write shows up as NaN, and a tolerance check
// |got - ref| <= atol + rtol * |ref| that names the first offending element.
//
//   DS2_REQUIRE_GPU();                               // skips, saying why, without a GPU
//   ds2::CudaContext ctx;
//   ds2::Rng rng(1);
//   ds2::Sequences x = ds2::random_sequences({T, B, F}, {T, T - 3}, rng);
//   ds2::DeviceSequences dx;  ds2::upload(x, dx, ctx.stream());
//   ds2::poison(dy, ctx);  ... run ...
//   ds2::expect_close(ref.data, download_tensor(dy, ctx), 1e-5, 1e-4, "forward");
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/cuda/context.h"
#include "core/cuda/device_tensor.h"
#include "core/rng.h"
#include "kernels/elementwise.h"
#include "nn/cuda/device_sequences.h"
#include "nn/sequences.h"
#include "support/sequences_testing.h"

#define DS2_REQUIRE_GPU()                                   \
  do {                                                      \
    std::string ds2_gpu_why_;                               \
    if (!::ds2::cuda_available(&ds2_gpu_why_))              \
      GTEST_SKIP() << "GPU test skipped: " << ds2_gpu_why_; \
  } while (0)

namespace ds2 {

inline void fill_uniform(Tensor& t, Rng& rng, float lo = -1.0f, float hi = 1.0f) {
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = rng.uniform(lo, hi);
}

// Fills with NaN, so unwritten output elements fail any comparison.
inline void poison(DeviceTensor& t, const CudaContext& ctx) {
  kernels::fill(t.data(), t.numel(), std::nanf(""), ctx.stream());
}
inline void poison(float* data, int64_t n, const CudaContext& ctx) {
  kernels::fill(data, n, std::nanf(""), ctx.stream());
}

inline Tensor download_tensor(const DeviceTensor& t, const CudaContext& ctx) {
  Tensor host;
  download(t, host, ctx.stream());
  return host;
}

inline void expect_close(const float* ref, const float* got, int64_t n, double atol, double rtol,
                         const std::string& what) {
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - ref[i]);
    const double allowed = atol + rtol * std::fabs(static_cast<double>(ref[i]));
    if (!(err <= allowed)) {  // NaN fails too
      if (first < 0) first = i;
      ++bad;
    }
    if (err > worst || std::isnan(err)) worst = std::isnan(err) ? INFINITY : err;
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << n << " elements off (atol " << atol
                    << ", rtol " << rtol << "); first at " << first << ": ref "
                    << (first >= 0 ? ref[first] : 0) << " got " << (first >= 0 ? got[first] : 0)
                    << "; max abs error " << worst;
}

// The same bits everywhere (NaN payloads included): results that must not depend on a scale or on
// which kernel computed them.
inline void expect_bits_equal(const std::vector<float>& want, const std::vector<float>& got,
                              const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  int64_t differ = 0, first = -1;
  for (size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(&want[i], &got[i], sizeof(float)) != 0 && differ++ == 0)
      first = static_cast<int64_t>(i);
  EXPECT_EQ(differ, 0) << what << ": " << differ << " elements differ, first at " << first << ": "
                       << (first >= 0 ? want[first] : 0.0f) << " vs "
                       << (first >= 0 ? got[first] : 0.0f);
}

// ||got - ref|| / ||ref|| over whole tensors (NaN if any element is): where a few elements may
// legitimately move by a whole step (a ReLU flipped by bf16 rounding), the tensor moves little.
inline double relative_error(const float* ref, const float* got, int64_t n) {
  double diff = 0.0, norm = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    diff += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
    norm += double(ref[i]) * ref[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

// Bounds on relative_error for bf16 GPU layers against the fp32 CPU ones, through one to four
// recurrent layers (rnn_stack_layer_test.cpp measured y 8-9e-4 and gradients up to 0.055 through
// four). Behind sequence-wise batch norm the gradients move more: its backward subtracts the
// frame means, so the few clipped-ReLU units that bf16 rounding flips weigh more in what is left
// (CudaRnnLayerTest measured 0.08-0.16 on a 37-wide layer over 9-21 frames, H200).
constexpr double kBf16ForwardError = 2e-2, kBf16GradientError = 8e-2;
constexpr double kBf16BatchNormGradientError = 0.2;

inline void expect_close(const Tensor& ref, const Tensor& got, double atol, double rtol,
                         const std::string& what) {
  ASSERT_EQ(ref.shape(), got.shape())
      << what << ": shape " << shape_str(got.shape()) << ", reference " << shape_str(ref.shape());
  expect_close(ref.data(), got.data(), ref.numel(), atol, rtol, what);
}

}  // namespace ds2
