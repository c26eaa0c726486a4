#include "nn/cuda/bench_timing.h"

#include <algorithm>
#include <cmath>

#include "core/cuda/check.h"
#include "core/cuda/device_tensor.h"
#include "core/cuda/step_graph.h"
#include "core/error.h"

namespace ds2 {
namespace {

class Events {
 public:
  Events() {
    DS2_CUDA_CHECK(cudaEventCreate(&start_));
    DS2_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~Events() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace

double median_ms(cudaStream_t stream, int warmup, int repeats, const std::function<void()>& setup,
                 const std::function<void()>& run) {
  Events ev;
  for (int i = 0; i < warmup; ++i) {
    setup();
    run();
  }
  DS2_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> ms;
  for (int i = 0; i < repeats; ++i) {
    setup();
    DS2_CUDA_CHECK(cudaEventRecord(ev.start_, stream));
    run();
    DS2_CUDA_CHECK(cudaEventRecord(ev.stop_, stream));
    DS2_CUDA_CHECK(cudaEventSynchronize(ev.stop_));
    float t = 0.0f;
    DS2_CUDA_CHECK(cudaEventElapsedTime(&t, ev.start_, ev.stop_));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

double median_graph_ms(cudaStream_t stream, int warmup, int repeats,
                       const std::function<void()>& setup, const std::function<void()>& run) {
  StepGraph graph(1);
  auto replay = [&] { graph.run({0}, stream, run); };
  // StepGraph runs a key eagerly the first time and captures it the second.
  for (int i = 0; i < 2; ++i) {
    setup();
    replay();
  }
  return median_ms(stream, warmup, repeats, setup, replay);
}

namespace {

// median_graph_ms where `run` captures, else median_ms; *captured says which.
double median_graph_ms_or_launched(cudaStream_t stream, int warmup, int repeats,
                                   const std::function<void()>& setup,
                                   const std::function<void()>& run, bool* captured) {
  try {
    *captured = true;
    return median_graph_ms(stream, warmup, repeats, setup, run);
  } catch (const Error&) {
    (void)cudaGetLastError();  // StepGraph ended the capture; clear its error
    *captured = false;
    return median_ms(stream, warmup, repeats, setup, run);
  }
}

}  // namespace

void time_rnn_row(BenchRow& row, cudaStream_t stream, int warmup, int repeats, int T,
                  const std::function<void()>& forward, const std::function<void()>& backward,
                  const std::function<void()>& before_forward) {
  const std::function<void()> setup = before_forward ? before_forward : [] {};
  const auto nothing = [] {};
  bool fwd_graph = false, bwd_graph = false;
  row.fwd_us =
      1e3 * median_graph_ms_or_launched(stream, warmup, repeats, setup, forward, &fwd_graph) / T;
  setup();
  forward();
  row.bwd_us =
      1e3 * median_graph_ms_or_launched(stream, warmup, repeats, nothing, backward, &bwd_graph) / T;
  setup();
  forward();
  backward();
  if (!fwd_graph || !bwd_graph) row.add_note("launched: not capturable");
}

std::vector<float> download_vector(const float* device, int64_t n, cudaStream_t stream) {
  std::vector<float> host(static_cast<size_t>(n));
  download(device, n, host.data(), stream);
  return host;
}

double scaled_max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, scale = 1.0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(a[i])));
    if (std::isnan(a[i]) != std::isnan(b[i])) diff = INFINITY;
  }
  return diff / scale;
}

}  // namespace ds2
