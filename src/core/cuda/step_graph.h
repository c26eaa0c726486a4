// StepGraph: replays a recorded sequence of launches as one CUDA graph when the same work comes
// again. The GEMM RNN queues two launches per timestep and direction from the host, a wavefront
// stack several per layer and chunk; replaying them as a graph costs about a microsecond a node
// instead of a full launch. Capturing costs more than launching once, so a key is run eagerly the
// first time and captured the second time it comes; from then on it is replayed. Up to
// `capacity` graphs are kept (the least recently used one goes first), so work whose key takes a
// few values (a stack's number of chunks, say) is replayed for each of them; capacity 1 keeps one
// graph and one key seen once, for work whose keys recur in a row or not at all (benchmarks and
// fixed-length batches, or a GEMM RNN whose key holds every batch's lengths).
//
//   ds2::StepGraph graph(/*capacity=*/1);
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
  explicit StepGraph(size_t capacity = 1);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  void run(const std::vector<int64_t>& key, cudaStream_t stream,
           const std::function<void()>& record);
  // Replays and captures so far (for tests and benchmarks).
  int64_t replays() const { return replays_; }
  int64_t captures() const { return captures_; }

  // Off: always run eagerly (default on).
  void set_enabled(bool on) { enabled_ = on; }

 private:
  struct Entry {
    std::vector<int64_t> key;
    cudaGraphExec_t exec = nullptr;  // null: seen once, not captured yet
    int64_t last_use = 0;
  };
  // Drops the least recently used graph (graphs = true) or seen-once key.
  void forget_least_recent(bool graphs);

  size_t capacity_;
  std::vector<Entry> entries_;  // at most `capacity` graphs and `capacity` seen-once keys
  bool enabled_ = true;
  int64_t uses_ = 0, replays_ = 0, captures_ = 0;
};

}  // namespace ds2
