// StepGraph: replays a recorded sequence of launches as one CUDA graph when the same work comes
// again. The GEMM RNN queues two launches per timestep and direction from the host; replaying
// them as a graph costs about a microsecond a node instead of a full launch. Capturing costs
// more than launching once, so a key is run eagerly the first time and captured the second time
// it comes in a row (as in benchmarks and fixed-length batches); from then on it is replayed.
//
//   ds2::StepGraph graph;
//   graph.run({T, B, (int64_t)ptr, ...}, ctx.stream(), [&] { for (...) launch(...); });
//
// `record` must queue all its work on `stream` (it may fork to other streams and join back,
// through events) and must not synchronize; the key must name everything the work depends on
// (shapes and every device pointer), since a replay repeats the recorded launches exactly.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace ds2 {

class StepGraph {
 public:
  StepGraph() = default;
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  void run(const std::vector<int64_t>& key, cudaStream_t stream,
           const std::function<void()>& record);
  // Replays so far (for tests and benchmarks).
  int64_t replays() const { return replays_; }

  // Off: always run eagerly (default on).
  void set_enabled(bool on) { enabled_ = on; }

 private:
  void reset();
  std::vector<int64_t> key_;
  cudaGraphExec_t exec_ = nullptr;
  bool enabled_ = true;
  int64_t replays_ = 0;
};

}  // namespace ds2
