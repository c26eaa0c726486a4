// References and plumbing shared by the persistent RNN tests (dense and sparse): the GEMM
// recurrence of CudaRnnLayer rebuilt step for step, float64 CPU loops of the same recurrences,
// and host <-> device helpers.
//
//   Rng rng(1);
//   std::vector<int> len = make_lengths(T, B, rng);              // unequal, a 0 and a full one
//   gemm_forward(ctx, u, pre_copy, P, h, zero, dlen, len, T, B, H, reverse, clip);
//   expect_close(cpu_forward(u_host, pre, P, len, T, B, H, reverse, clip), got, "forward h");
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cuda/context.h"
#include "core/cuda/device_array.h"
#include "core/rng.h"

namespace ds2 {

std::vector<float> rounded_to_bf16(std::vector<float> v);
// Unequal lengths: a 0 (when B > 1), a full one, the rest random in [0, T], unsorted.
std::vector<int> make_lengths(int T, int B, Rng& rng);
std::vector<float> random_vector(int64_t n, Rng& rng, float lo, float hi);
void to_device(const std::vector<float>& host, DeviceArray<float>& dev, cudaStream_t stream);
std::vector<float> to_host(const float* dev, int64_t n, cudaStream_t stream);
void upload_lengths(const std::vector<int>& len, DeviceArray<int>& dev, cudaStream_t stream);

// CudaRnnLayer::run_direction (relu): per step pre += h_prev U^T over the active rows, then the
// clipped ReLU with the padding mask. `pre` is updated in place (pass a copy). `round_state`:
// the state multiplied each step is rounded to bf16 first (what tensor-core plans compute).
void gemm_forward(CudaContext& ctx, const float* u, float* pre, int P, float* h, const float* zero,
                  const int* dlen, const std::vector<int>& len, int T, int B, int H, bool reverse,
                  float clip, bool round_state = false);
// CudaRnnLayer::backprop_direction's loop (relu): dpre for every t.
void gemm_backward_data(CudaContext& ctx, const float* u, const float* h, const float* dy,
                        float* dpre, int P, const int* dlen, const std::vector<int>& len, int T,
                        int B, int H, bool reverse, float clip, bool round_state = false);

// float64 references of the same recurrences (direction column offset already applied).
// `round_state`: the state carried to the next step is rounded to bf16 first (tensor-core plans).
std::vector<float> cpu_forward(const std::vector<float>& u, const float* pre, int P,
                               const std::vector<int>& len, int T, int B, int H, bool reverse,
                               float clip, bool round_state = false);
std::vector<float> cpu_backward_data(const std::vector<float>& u, const std::vector<float>& h,
                                     const std::vector<float>& dy, const std::vector<int>& len,
                                     int T, int B, int H, bool reverse, float clip,
                                     bool round_state = false);

// Columns [d*H, d*H + H) of a {rows, P} array, as a {rows, H} array.
std::vector<float> columns(const std::vector<float>& a, int64_t rows, int P, int d, int H);

void expect_close(const std::vector<float>& ref, const std::vector<float>& got,
                  const std::string& what, double atol = 1e-5, double rtol = 1e-5);

}  // namespace ds2
