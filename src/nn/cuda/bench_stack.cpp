#include "nn/cuda/bench_stack.h"

#include <cmath>
#include <iomanip>
#include <memory>
#include <sstream>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/device_array.h"
#include "core/cuda/device_tensor.h"
#include "core/error.h"
#include "core/rng.h"
#include "nn/cuda/bench_timing.h"
#include "nn/cuda/rnn_stack.h"

namespace ds2 {
namespace {

DeviceArray<float> random_device(int64_t n, float bound, Rng& rng, cudaStream_t stream) {
  std::vector<float> host(static_cast<size_t>(n));
  for (float& v : host) v = rng.uniform(-bound, bound);
  DeviceArray<float> dev;
  dev.reserve(n);
  upload(host.data(), n, dev.data(), stream);
  return dev;
}

std::vector<float> download_all(const float* dev, int64_t n, cudaStream_t stream) {
  std::vector<float> host(static_cast<size_t>(n));
  download(dev, n, host.data(), stream);
  return host;
}

}  // namespace

std::string run_stack_bench(const StackBenchOptions& o) {
  DS2_CHECK(o.layers >= 1 && o.hidden >= 1 && o.batch >= 1 && o.steps >= 1 && o.repeats >= 1 &&
                o.warmup >= 0,
            "bench stack: layers, hidden, batch, steps and repeats must be positive");
  DS2_CHECK(!o.chunks.empty(), "bench stack: no chunk size given");
  for (int c : o.chunks) DS2_CHECK(c >= 1, "bench stack: chunk " << c << " is not positive");
  DS2_CHECK(o.precision == "fp32" || o.precision == "bf16",
            "bench stack: precision '" << o.precision << "' is neither fp32 nor bf16");
  const Precision precision = o.precision == "bf16" ? Precision::kBf16 : Precision::kFp32;
  const int L = o.layers, H = o.hidden, B = o.batch, T = o.steps;

  CudaContext ctx;
  cudaStream_t s = ctx.stream();
  Rng rng(7);
  // U ~ U(-0.5/sqrt(H), 0.5/sqrt(H)) keeps the recurrence contractive, W ~ U(-1/sqrt(H), ..):
  // activations stay O(1) through the stack, far below the clip.
  const float a = 1.0f / std::sqrt(static_cast<float>(H));
  std::vector<DeviceArray<float>> w, u, bias;
  std::vector<RnnStackWeights> weights;
  for (int l = 0; l < L; ++l) {
    w.push_back(random_device(int64_t{H} * H, a, rng, s));
    u.push_back(random_device(int64_t{H} * H, 0.5f * a, rng, s));
    bias.push_back(random_device(H, 0.1f, rng, s));
  }
  for (int l = 0; l < L; ++l) weights.push_back({w[l].data(), u[l].data(), bias[l].data()});
  const int64_t n = int64_t{T} * B * H;
  DeviceArray<float> x = random_device(n, 1.0f, rng, s);
  const std::vector<int> lengths(static_cast<size_t>(B), T);
  DeviceArray<int> device_lengths;
  device_lengths.reserve(B);
  DS2_CUDA_CHECK(cudaMemcpyAsync(device_lengths.data(), lengths.data(), sizeof(int) * B,
                                 cudaMemcpyHostToDevice, s));
  DeviceArray<float> y_seq, y_wave, dx_seq, dx_wave;
  for (auto* a : {&y_seq, &y_wave, &dx_seq, &dx_wave}) a->reserve(n);
  DeviceArray<float> dy = random_device(n, 1.0f, rng, s);
  std::vector<DeviceArray<float>> gw(L), gu(L), gb(L);
  std::vector<RnnStackGradients> grads;
  for (int l = 0; l < L; ++l) {
    gw[l].reserve(int64_t{H} * H);
    gu[l].reserve(int64_t{H} * H);
    gb[l].reserve(H);
    grads.push_back({gw[l].data(), gu[l].data(), gb[l].data()});
  }

  std::ostringstream out;
  out << std::fixed;
  out << "stack: " << L << " unidirectional clipped-ReLU layers of " << H << ", residual, batch "
      << B << ", " << T << " steps, " << o.precision << "; median of " << o.repeats
      << " passes; forward / backward (dx, dW, dU, db)\n";
  auto nothing = [] {};
  // Forward and backward of one schedule: ms per pass of each.
  auto time_schedule = [&](CudaRnnStack& stack, bool wavefront, DeviceArray<float>& y,
                           DeviceArray<float>& dx) {
    const double fwd = median_ms(s, o.warmup, o.repeats, nothing, [&] {
      stack.forward(x.data(), weights, lengths, device_lengths.data(), T, B, wavefront, y.data());
    });
    const double bwd = median_ms(s, o.warmup, o.repeats, nothing, [&] {
      stack.backward(x.data(), y.data(), weights, dy.data(), lengths, device_lengths.data(), T, B,
                     wavefront, dx.data(), grads);
    });
    return std::make_pair(fwd, bwd);
  };
  auto per_step = [&](double ms) { return 1e3 * ms / (double(L) * T); };
  std::pair<double, double> seq{-1.0, -1.0};
  std::vector<float> y_ref, dx_ref;
  for (int chunk : o.chunks) {
    CudaRnnStack stack(ctx, L, H, H, B, T, precision, /*residual=*/true, chunk);
    if (seq.first < 0) {
      out << "plan: " << stack.plan().describe() << "\n";
      seq = time_schedule(stack, false, y_seq, dx_seq);
      y_ref = download_all(y_seq.data(), n, s);
      dx_ref = download_all(dx_seq.data(), n, s);
      out << std::setprecision(3) << "ours, layer after layer:  " << seq.first << " / "
          << seq.second << " ms per pass, " << std::setprecision(2) << per_step(seq.first) << " / "
          << per_step(seq.second) << " us per layer-step\n";
    }
    if (!stack.wavefront_possible()) {
      out << "ours, wavefront:          not run (" << stack.wavefront_why_not() << ")\n";
      break;
    }
    const std::pair<double, double> wave = time_schedule(stack, true, y_wave, dx_wave);
    double eager_ms = -1.0;
    if (chunk == o.chunks.front()) {  // what the CUDA graph saves, once
      stack.set_use_graphs(false);
      eager_ms = median_ms(s, o.warmup, o.repeats, nothing, [&] {
        stack.forward(x.data(), weights, lengths, device_lengths.data(), T, B, true, y_wave.data());
      });
      stack.set_use_graphs(true);
      stack.forward(x.data(), weights, lengths, device_lengths.data(), T, B, true, y_wave.data());
      stack.backward(x.data(), y_wave.data(), weights, dy.data(), lengths, device_lengths.data(), T,
                     B, true, dx_wave.data(), grads);
    }
    const double y_diff = scaled_max_diff(y_ref, download_all(y_wave.data(), n, s));
    const double dx_diff = scaled_max_diff(dx_ref, download_all(dx_wave.data(), n, s));
    out << "ours, wavefront, chunk " << std::setw(3) << chunk << ": " << std::setprecision(3)
        << wave.first << " / " << wave.second << " ms per pass, " << std::setprecision(2)
        << per_step(wave.first) << " / " << per_step(wave.second) << " us per layer-step, "
        << seq.first / wave.first << "x / " << seq.second / wave.second << "x, up to "
        << stack.concurrent_layers()
        << " layers at once; y, dx vs layer after layer: " << std::scientific
        << std::setprecision(1) << y_diff << ", " << dx_diff << std::fixed << "\n";
    if (eager_ms > 0)
      out << "  (the forward launched from the host, without the CUDA graph: "
          << std::setprecision(3) << eager_ms << " ms per pass)\n";
  }
  DS2_CUDA_CHECK(cudaStreamSynchronize(s));
  return out.str();
}

}  // namespace ds2
