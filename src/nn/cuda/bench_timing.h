// Timing and comparison helpers shared by the GPU benchmarks (`ds2 bench rnn`, `ds2 bench stack`):
// the median of repeated runs timed with CUDA events on one stream, results brought to the host,
// and one number for how far two results are apart.
//
//   double ms = median_ms(stream, /*warmup=*/3, /*repeats=*/20, [] {}, [&] { run(); });
//   double d = scaled_max_diff(download_vector(ref, n, s), download_vector(got, n, s));
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "nn/cuda/bench_table.h"

namespace ds2 {

// Median milliseconds of `repeats` timed calls of `run` on `stream`, each after an untimed
// `setup`, following `warmup` untimed rounds.
double median_ms(cudaStream_t stream, int warmup, int repeats, const std::function<void()>& setup,
                 const std::function<void()>& run);
// The same with `run` captured once (untimed) and replayed as one CUDA graph, as CudaRnnLayer
// replays the GEMM recurrence's per-step launches (core/cuda/step_graph.h): the time on the GPU,
// without the host's launches. `run` must meet StepGraph's rules (no synchronization).
double median_graph_ms(cudaStream_t stream, int warmup, int repeats,
                       const std::function<void()>& setup, const std::function<void()>& run);
// An RNN's forward and backward-data (cuDNN's, our persistent kernels', our GEMM recurrence's) into
// row.fwd_us and row.bwd_us, us a timestep over T, each as a graph (median_graph_ms) where it
// captures, else launched (a library call that synchronizes or allocates fails under capture),
// "launched: not capturable" then joining the row's note. `before_forward`, where given, runs
// untimed before every forward (a forward that overwrites its input). Backward-data is timed after
// one forward (the reserve space it reads), and one forward and one backward-data run last:
// repeated backward-data calls read a reserve space the previous one wrote, so the outputs to
// check are those of a pair.
void time_rnn_row(BenchRow& row, cudaStream_t stream, int warmup, int repeats, int T,
                  const std::function<void()>& forward, const std::function<void()>& backward,
                  const std::function<void()>& before_forward = {});

// n device floats on the host (waits for `stream`).
std::vector<float> download_vector(const float* device, int64_t n, cudaStream_t stream);

// max |a - b| / max(1, max |a|) over two equally long vectors; infinite where only one is NaN.
double scaled_max_diff(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace ds2
