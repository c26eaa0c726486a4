#include "support/cuda_rnn_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/bf16.h"
#include "core/cuda/check.h"
#include "kernels/elementwise.h"
#include "kernels/rnn.h"
#include "nn/cuda/gemm_recurrence.h"
#include "support/cuda_compare.h"

namespace ds2 {

std::vector<float> rounded_to_bf16(std::vector<float> v) {
  for (float& x : v) x = bf16_to_float(float_to_bf16(x));
  return v;
}

// Unequal lengths: a 0 (when B > 1), a full one, the rest random in [0, T], unsorted.
std::vector<int> make_lengths(int T, int B, Rng& rng) {
  std::vector<int> len(B);
  for (int b = 0; b < B; ++b) len[b] = static_cast<int>(rng.uniform_int(0, T));
  if (B > 0) len[B / 2] = T;
  if (B > 1) len[B - 1] = 0;
  return len;
}

std::vector<float> random_vector(int64_t n, Rng& rng, float lo, float hi) {
  std::vector<float> v(n);
  for (auto& x : v) x = rng.uniform(lo, hi);
  return v;
}

void to_device(const std::vector<float>& host, DeviceArray<float>& dev, cudaStream_t stream) {
  dev.reserve(std::max<int64_t>(1, static_cast<int64_t>(host.size())));
  if (!host.empty()) upload(host.data(), static_cast<int64_t>(host.size()), dev.data(), stream);
}

std::vector<float> to_host(const float* dev, int64_t n, cudaStream_t stream) {
  std::vector<float> host(n);
  if (n > 0) download(dev, n, host.data(), stream);
  return host;
}

void upload_lengths(const std::vector<int>& len, DeviceArray<int>& dev, cudaStream_t stream) {
  dev.reserve(std::max<int64_t>(1, static_cast<int64_t>(len.size())));
  if (!len.empty())
    DS2_CUDA_CHECK(cudaMemcpyAsync(dev.data(), len.data(), len.size() * sizeof(int),
                                   cudaMemcpyHostToDevice, stream));
}

// Per t: 1 + the last batch row valid at t (CudaRnnLayer's active_rows_).
namespace {

std::vector<int> active_rows(const std::vector<int>& len, int T) {
  std::vector<int> m(T, 0);
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < static_cast<int>(len.size()); ++b)
      if (t < len[b]) m[t] = b + 1;
  return m;
}

}  // namespace

// CudaRnnLayer::run_direction (relu), on the same step functions (nn/cuda/gemm_recurrence.h):
// per step pre += h_prev U^T over the active rows, then the clipped ReLU with the padding mask.
// `pre` is updated in place (pass a copy). `round_state`: the bf16 GEMM recurrence (U and the
// state multiplied each step rounded to bf16, what tensor-core plans compute).
void gemm_forward(CudaContext& ctx, const float* u, float* pre, int P, float* h, const float* zero,
                  const int* dlen, const std::vector<int>& len, int T, int B, int H, bool reverse,
                  float clip, bool round_state) {
  const std::vector<int> m = active_rows(len, T);
  GemmRecurrenceBf16 ops(round_state, u, 1, H, T, B, ctx.stream());
  const GemmRecurrence r{ctx.cublas(), ctx.stream(), u, ops.u(), H, B, dlen, ops.product()};
  // fp32 steps whose GEMM runs padded rows read the states and the zero state in place past B
  // rows (gemm_recurrence_extra_rows): then the states go to a copy with room for them.
  const int64_t extra = round_state ? 0 : int64_t{gemm_recurrence_extra_rows(B, 1, H, false)} * H;
  const int64_t n = int64_t{T} * B * H;
  DeviceArray<float> roomy_h(extra > 0 ? n + extra : 0), roomy_zero(extra > 0 ? B * H + extra : 0);
  float* hw = h;
  if (extra > 0) {
    hw = roomy_h.data();
    kernels::fill(roomy_zero.data(), roomy_zero.capacity(), 0.0f, ctx.stream());
    zero = roomy_zero.data();
  }
  for (int step = 0; step < T; ++step) {
    const int t = reverse ? T - 1 - step : step;
    const int tp = reverse ? t + 1 : t - 1;
    const float* hp = tp < 0 || tp >= T ? zero : hw + int64_t{tp} * B * H;
    kernels::RnnStepPrefetch next;
    if (step + 1 < T) next.pre = pre + int64_t{reverse ? t - 1 : t + 1} * B * P;
    relu_gemm_step_forward(r, t, m[t], hp, ops.state_before(tp), pre + int64_t{t} * B * P, P,
                           hw + int64_t{t} * B * H, ops.state(t), clip, next);
  }
  if (hw != h)
    DS2_CUDA_CHECK(
        cudaMemcpyAsync(h, hw, n * sizeof(float), cudaMemcpyDeviceToDevice, ctx.stream()));
}

// CudaRnnLayer::backprop_direction's loop (relu), on the same step functions: dpre for every t.
// `round_state`: the bf16 GEMM recurrence (U and each dpre rounded).
void gemm_backward_data(CudaContext& ctx, const float* u, const float* h, const float* dy,
                        float* dpre, int P, const int* dlen, const std::vector<int>& len, int T,
                        int B, int H, bool reverse, float clip, bool round_state) {
  const std::vector<int> m = active_rows(len, T);
  GemmRecurrenceBf16 ops(round_state, u, 1, H, T, B, ctx.stream());
  const GemmRecurrence r{ctx.cublas(), ctx.stream(), u, ops.u(), H, B, dlen};
  DeviceArray<float> carry_next(2 * gemm_recurrence_carry_size(B, 1, H, round_state));
  float* carry = carry_next.data();
  float* next = carry + gemm_recurrence_carry_size(B, 1, H, round_state);
  kernels::fill(carry, carry_next.capacity(), 0.0f, ctx.stream());
  // fp32 steps whose GEMM runs padded rows read dpre in place past its last rows: a copy with
  // room for them (gemm_recurrence_extra_rows), the other columns kept.
  const int64_t extra = round_state ? 0 : int64_t{gemm_recurrence_extra_rows(B, 1, H, false)} * P;
  // dpre may start at a direction's column offset: the span its T B rows of H take.
  const int64_t n = T * B > 0 ? (int64_t{T} * B - 1) * P + H : 0;
  DeviceArray<float> roomy(extra > 0 ? n + extra : 0);
  float* dw = dpre;
  if (extra > 0) {
    dw = roomy.data();
    DS2_CUDA_CHECK(
        cudaMemcpyAsync(dw, dpre, n * sizeof(float), cudaMemcpyDeviceToDevice, ctx.stream()));
  }
  for (int step = 0; step < T; ++step) {
    const int t = reverse ? step : T - 1 - step;
    kernels::RnnStepPrefetch next_step;
    if (step + 1 < T) {
      const int tn = reverse ? t + 1 : t - 1;
      next_step.state = h + int64_t{tn} * B * H;
      next_step.dy = dy + int64_t{tn} * B * H;
    }
    relu_gemm_step_backward(r, t, m[t], h + int64_t{t} * B * H, dy + int64_t{t} * B * H, carry,
                            dw + int64_t{t} * B * P, P, ops.step_grad(), next, clip, next_step);
    std::swap(carry, next);
  }
  if (dw != dpre)
    DS2_CUDA_CHECK(
        cudaMemcpyAsync(dpre, dw, n * sizeof(float), cudaMemcpyDeviceToDevice, ctx.stream()));
}

// float64 references of the same recurrences (direction column offset already applied).
namespace {
// What a tensor-core kernel multiplies by: the fp32 state rounded to bf16 (nearest even).
double as_bf16(double v) {
  return bf16_to_float(float_to_bf16(static_cast<float>(v)));
}
}  // namespace

std::vector<float> cpu_forward(const std::vector<float>& u, const float* pre, int P,
                               const std::vector<int>& len, int T, int B, int H, bool reverse,
                               float clip, bool round_state) {
  std::vector<float> h(int64_t{T} * B * H, 0.0f);
  std::vector<double> prev(int64_t{B} * H, 0.0), cur(int64_t{B} * H);
  for (int step = 0; step < T; ++step) {
    const int t = reverse ? T - 1 - step : step;
    for (int b = 0; b < B; ++b)
      for (int k = 0; k < H; ++k) {
        double v = 0.0;
        if (t < len[b]) {
          double s = pre[(int64_t{t} * B + b) * P + k];
          for (int j = 0; j < H; ++j) s += prev[int64_t{b} * H + j] * u[int64_t{k} * H + j];
          v = std::min(std::max(s, 0.0), static_cast<double>(clip));
        }
        cur[int64_t{b} * H + k] = round_state ? as_bf16(v) : v;
        h[(int64_t{t} * B + b) * H + k] = static_cast<float>(v);
      }
    prev.swap(cur);
  }
  return h;
}

std::vector<float> cpu_backward_data(const std::vector<float>& u, const std::vector<float>& h,
                                     const std::vector<float>& dy, const std::vector<int>& len,
                                     int T, int B, int H, bool reverse, float clip,
                                     bool round_state) {
  std::vector<float> dpre(int64_t{T} * B * H, 0.0f);  // ld H
  std::vector<double> prev(int64_t{B} * H, 0.0), cur(int64_t{B} * H);
  for (int step = 0; step < T; ++step) {
    const int t = reverse ? step : T - 1 - step;
    for (int b = 0; b < B; ++b)
      for (int j = 0; j < H; ++j) {
        const int64_t i = (int64_t{t} * B + b) * H + j;
        double v = 0.0;
        if (t < len[b] && h[i] > 0.0f && h[i] < clip) {
          double s = dy[i];
          for (int k = 0; k < H; ++k) s += prev[int64_t{b} * H + k] * u[int64_t{k} * H + j];
          v = s;
        }
        cur[int64_t{b} * H + j] = round_state ? as_bf16(v) : v;
        dpre[i] = static_cast<float>(v);
      }
    prev.swap(cur);
  }
  return dpre;
}

// Columns [d*H, d*H + H) of a {rows, P} array, as a {rows, H} array.
std::vector<float> columns(const std::vector<float>& a, int64_t rows, int P, int d, int H) {
  std::vector<float> out(rows * H);
  for (int64_t r = 0; r < rows; ++r)
    std::copy(a.begin() + r * P + int64_t{d} * H, a.begin() + r * P + int64_t{d} * H + H,
              out.begin() + r * H);
  return out;
}

void expect_close(const std::vector<float>& ref, const std::vector<float>& got,
                  const std::string& what, double atol, double rtol) {
  ASSERT_EQ(ref.size(), got.size()) << what;
  ds2::expect_close(ref.data(), got.data(), static_cast<int64_t>(ref.size()), atol, rtol, what);
}

}  // namespace ds2
