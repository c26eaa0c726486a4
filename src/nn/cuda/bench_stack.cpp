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

#ifdef DS2_HAVE_CUDNN
#include "kernels/elementwise.h"
#include "nn/cuda/cudnn_rnn_support.h"
#endif

namespace ds2 {
namespace {

std::vector<float> random_host(int64_t n, float bound, Rng& rng) {
  std::vector<float> host(static_cast<size_t>(n));
  for (float& v : host) v = rng.uniform(-bound, bound);
  return host;
}

DeviceArray<float> to_device(const std::vector<float>& host, cudaStream_t stream) {
  DeviceArray<float> dev;
  dev.reserve(static_cast<int64_t>(host.size()));
  upload(host.data(), static_cast<int64_t>(host.size()), dev.data(), stream);
  return dev;
}

#ifdef DS2_HAVE_CUDNN
struct CudnnStackTimes {
  double fwd_ms = -1.0, bwd_ms = -1.0;
  std::vector<float> y;
  std::string note;
};

// cuDNN's multi-layer RNN on the same weights: numLayers L, CUDNN_RNN_RELU, unidirectional,
// linear input with one input bias (W x + b + R h, as ours without the residual); forward, then
// backward-data and backward-weights together (what our backward computes).
CudnnStackTimes run_cudnn_stack(cudnnRNNAlgo_t algo, cudnnDataType_t dtype, cudnnMathType_t math,
                                const std::vector<std::vector<float>>& w,
                                const std::vector<std::vector<float>>& u,
                                const std::vector<std::vector<float>>& bias,
                                const std::vector<float>& x, const std::vector<float>& dy, int L,
                                int H, int B, int T, int warmup, int repeats, cudaStream_t stream) {
  CudnnStackTimes out;
  try {
    CudnnShared c;
    setup_cudnn(c, stream, H, B, T, dtype, L);
    DeviceArray<float> x16, dy16, staged;
    upload_as(x, dtype, x16, stream);
    upload_as(dy, dtype, dy16, stream);
    // The persistent algorithms may refuse one input bias: a second (recurrent) bias stays zero.
    std::unique_ptr<CudnnRnn> made;
    for (cudnnRNNBiasMode_t mode : {CUDNN_RNN_SINGLE_INP_BIAS, CUDNN_RNN_DOUBLE_BIAS}) {
      try {
        made = std::make_unique<CudnnRnn>(c, algo, mode, CUDNN_LINEAR_INPUT, dtype, math, H, L, B,
                                          stream);
        if (mode == CUDNN_RNN_DOUBLE_BIAS) out.note = "one input bias refused: a second, zero bias";
        break;
      } catch (const Error&) {
        (void)cudaGetLastError();
        if (mode == CUDNN_RNN_DOUBLE_BIAS) throw;
      }
    }
    CudnnRnn& r = *made;
    DeviceArray<float> dweights(static_cast<int64_t>(r.weight_bytes / sizeof(float) + 1));
    const int64_t n = int64_t{T} * B * H;
    const int64_t n16 = (n * static_cast<int64_t>(element_bytes(dtype)) + 3) / 4;
    DeviceArray<float> y(n16), dx(n16);
    for (int l = 0; l < L; ++l)
      for (int id = 0; id < 2; ++id) {  // 0: W (input), 1: R (recurrent), row-major {H, H}
        void* m_addr = nullptr;
        void* b_addr = nullptr;
        DS2_CUDNN_CHECK(cudnnGetRNNWeightParams(c.handle, r.rnn, l, r.weight_bytes,
                                                r.weights.data(), id, r.m, &m_addr, r.b, &b_addr));
        DS2_CHECK(m_addr != nullptr, "cuDNN gave no matrix for layer " << l << ", id " << id);
        upload_as(id == 0 ? w[l] : u[l], dtype, staged, stream);
        DS2_CUDA_CHECK(cudaMemcpyAsync(m_addr, staged.data(), element_bytes(dtype) * H * H,
                                       cudaMemcpyDeviceToDevice, stream));
        if (id == 0 && b_addr) {
          upload_as(bias[l], dtype, staged, stream);
          DS2_CUDA_CHECK(cudaMemcpyAsync(b_addr, staged.data(), element_bytes(dtype) * H,
                                         cudaMemcpyDeviceToDevice, stream));
        }
      }
    auto forward = [&] { r.forward(c, x16.data(), y.data()); };
    // Backward-weights accumulates (cuDNN 9 refuses CUDNN_WGRAD_MODE_SET): zeroing dW is the
    // untimed setup of each pass, as a framework zeroes its gradients once per step.
    const auto zero_dweights = [&] {
      kernels::fill(dweights.data(), dweights.capacity(), 0.0f, stream);
    };
    auto backward = [&] {
      r.backward_data(c, y.data(), dy16.data(), dx.data());
      DS2_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(
          c.handle, r.rnn, CUDNN_WGRAD_MODE_ADD, c.seq_lengths.data(), c.x, x16.data(), c.h,
          nullptr, c.y, y.data(), r.weight_bytes, dweights.data(), r.work_bytes, r.work.data(),
          r.reserve_bytes, r.reserve.data()));
    };
    const auto nothing = [] {};
    out.fwd_ms = median_ms(stream, warmup, repeats, nothing, forward);
    forward();  // the reserve space backward reads
    out.bwd_ms = median_ms(stream, warmup, repeats, zero_dweights, backward);
    out.y = download_as(y.data(), n, dtype, stream);
  } catch (const Error& e) {
    (void)cudaGetLastError();
    out.fwd_ms = out.bwd_ms = -1.0;
    out.note = std::string("n/a: ") + e.what();
  }
  return out;
}
#endif  // DS2_HAVE_CUDNN

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
  // U ~ U(-0.5/sqrt(H), 0.5/sqrt(H)) keeps the recurrence contractive; W ~ U(-1/sqrt(H), ..) with
  // the residual path, U(-sqrt(6/H), ..) without it (He's bound: the ReLU halves the second
  // moment): activations stay O(1) through the stack, far below the clip.
  const float a = 1.0f / std::sqrt(static_cast<float>(H));
  const float w_bound = o.residual ? a : std::sqrt(6.0f / static_cast<float>(H));
  std::vector<std::vector<float>> hw, hu, hb;
  std::vector<DeviceArray<float>> w, u, bias;
  std::vector<RnnStackWeights> weights;
  for (int l = 0; l < L; ++l) {
    hw.push_back(random_host(int64_t{H} * H, w_bound, rng));
    hu.push_back(random_host(int64_t{H} * H, 0.5f * a, rng));
    hb.push_back(random_host(H, 0.1f, rng));
    w.push_back(to_device(hw[l], s));
    u.push_back(to_device(hu[l], s));
    bias.push_back(to_device(hb[l], s));
  }
  for (int l = 0; l < L; ++l) weights.push_back({w[l].data(), u[l].data(), bias[l].data()});
  const int64_t n = int64_t{T} * B * H;
  const std::vector<float> hx = random_host(n, 1.0f, rng), hdy = random_host(n, 1.0f, rng);
  DeviceArray<float> x = to_device(hx, s), dy = to_device(hdy, s);
  const std::vector<int> lengths(static_cast<size_t>(B), T);
  DeviceArray<int> device_lengths;
  device_lengths.reserve(B);
  DS2_CUDA_CHECK(cudaMemcpyAsync(device_lengths.data(), lengths.data(), sizeof(int) * B,
                                 cudaMemcpyHostToDevice, s));
  DeviceArray<float> y_seq, y_wave, dx_seq, dx_wave;
  for (auto* arr : {&y_seq, &y_wave, &dx_seq, &dx_wave}) arr->reserve(n);
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
  out << "stack: " << L << " unidirectional clipped-ReLU layers of " << H
      << (o.residual ? ", residual" : ", no residual") << ", batch " << B << ", " << T << " steps, "
      << o.precision << "; median of " << o.repeats
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
  // Forward and backward ms kept apart; < 0: none yet.
  std::pair<double, double> seq{-1.0, -1.0}, best{-1.0, -1.0};
  auto keep_best = [](std::pair<double, double>& kept, double fwd, double bwd) {
    if (kept.first < 0 || fwd < kept.first) kept.first = fwd;
    if (kept.second < 0 || bwd < kept.second) kept.second = bwd;
  };
  std::vector<float> y_ref, dx_ref;
  for (int chunk : o.chunks) {
    CudaRnnStack stack(ctx, L, H, H, B, T, precision, o.residual, chunk);
    if (seq.first < 0) {
      out << "plan: " << stack.plan().describe() << "\n";
      seq = time_schedule(stack, false, y_seq, dx_seq);
      keep_best(best, seq.first, seq.second);
      y_ref = download_vector(y_seq.data(), n, s);
      dx_ref = download_vector(dx_seq.data(), n, s);
      out << std::setprecision(3) << "ours, layer after layer:  " << seq.first << " / "
          << seq.second << " ms per pass, " << std::setprecision(2) << per_step(seq.first) << " / "
          << per_step(seq.second) << " us per layer-step\n";
    }
    if (!stack.wavefront_possible()) {
      out << "ours, wavefront:          not run (" << stack.wavefront_why_not() << ")\n";
      break;
    }
    const std::pair<double, double> wave = time_schedule(stack, true, y_wave, dx_wave);
    keep_best(best, wave.first, wave.second);
    double eager_ms = -1.0;
    if (chunk == o.chunks.front()) {  // what the CUDA graph saves, once
      stack.set_use_graphs(false);
      eager_ms = median_ms(s, o.warmup, o.repeats, nothing, [&] {
        stack.forward(x.data(), weights, lengths, device_lengths.data(), T, B, true, y_wave.data());
      });
      stack.set_use_graphs(true);  // the same launches: y_wave is as the graph wrote it
    }
    const double y_diff = scaled_max_diff(y_ref, download_vector(y_wave.data(), n, s));
    const double dx_diff = scaled_max_diff(dx_ref, download_vector(dx_wave.data(), n, s));
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

#ifdef DS2_HAVE_CUDNN
  {
    const int version = static_cast<int>(cudnnGetVersion());
    out << "cuDNN " << version / 10000 << "." << (version / 100) % 100 << "." << version % 100
        << ": " << L << "-layer CUDNN_RNN_RELU, unidirectional, linear input with one bias, "
        << (precision == Precision::kBf16 ? "16-bit data and weights, tensor-op math"
                                          : "fp32, CUDNN_FMA_MATH")
        << ", fp32 accumulation; backward = backward-data + backward-weights"
        << (o.residual ? " (no residual connections: it computes the stack without them)" : "")
        << "\n";
    struct Variant {
      cudnnDataType_t dtype;
      cudnnMathType_t math;
    };
    const std::vector<Variant> variants =
        precision == Precision::kBf16
            ? std::vector<Variant>{{CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_OP_MATH},
                                   {CUDNN_DATA_HALF, CUDNN_TENSOR_OP_MATH}}
            : std::vector<Variant>{{CUDNN_DATA_FLOAT, CUDNN_FMA_MATH}};
    const std::pair<cudnnRNNAlgo_t, const char*> algos[] = {
        {CUDNN_RNN_ALGO_STANDARD, "STANDARD"},
        {CUDNN_RNN_ALGO_PERSIST_STATIC, "PERSIST_STATIC"},
        {CUDNN_RNN_ALGO_PERSIST_DYNAMIC, "PERSIST_DYNAMIC"}};
    std::pair<double, double> best_cudnn{-1.0, -1.0};
    for (const Variant& v : variants)
      for (const auto& [algo, name] : algos) {
        const CudnnStackTimes t = run_cudnn_stack(algo, v.dtype, v.math, hw, hu, hb, hx, hdy, L, H,
                                                  B, T, o.warmup, o.repeats, s);
        out << "cuDNN " << name << " (" << dtype_name(v.dtype) << "): ";
        if (t.fwd_ms < 0) {
          out << t.note << "\n";
          continue;
        }
        keep_best(best_cudnn, t.fwd_ms, t.bwd_ms);
        out << std::setprecision(3) << t.fwd_ms << " / " << t.bwd_ms << " ms per pass, "
            << std::setprecision(2) << per_step(t.fwd_ms) << " / " << per_step(t.bwd_ms)
            << " us per layer-step";
        if (!o.residual)
          out << "; y vs ours layer after layer: " << std::scientific << std::setprecision(1)
              << scaled_max_diff(y_ref, t.y) << std::fixed;
        if (!t.note.empty()) out << "; " << t.note;
        out << "\n";
      }
    if (best_cudnn.first > 0)
      out << std::setprecision(2) << "ours (best schedule) against the best cuDNN algorithm: "
          << best_cudnn.first / best.first << "x forward, " << best_cudnn.second / best.second
          << "x backward (> 1: ours faster)\n";
  }
#else
  out << "cuDNN: not in this build (CMake did not find it), no cuDNN rows\n";
#endif
  DS2_CUDA_CHECK(cudaStreamSynchronize(s));
  return out.str();
}

}  // namespace ds2
