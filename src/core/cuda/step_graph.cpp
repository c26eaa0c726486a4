#include "core/cuda/step_graph.h"

#include <algorithm>

#include "core/cuda/check.h"
#include "core/error.h"

namespace ds2 {

StepGraph::StepGraph(size_t capacity) : capacity_(capacity) {
  DS2_CHECK(capacity >= 1, "StepGraph: capacity must be at least 1");
}

StepGraph::~StepGraph() {
  for (Entry& e : entries_)
    if (e.exec) cudaGraphExecDestroy(e.exec);  // errors ignored: destructors must not throw
}

void StepGraph::forget_least_recent(bool graphs) {
  auto oldest = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if ((it->exec != nullptr) == graphs &&
        (oldest == entries_.end() || it->last_use < oldest->last_use))
      oldest = it;
  if (oldest == entries_.end()) return;
  if (oldest->exec) cudaGraphExecDestroy(oldest->exec);
  entries_.erase(oldest);
}

void StepGraph::run(const std::vector<int64_t>& key, cudaStream_t stream,
                    const std::function<void()>& record) {
  if (!enabled_) {
    record();
    return;
  }
  ++uses_;
  auto match = [&] {
    return std::find_if(entries_.begin(), entries_.end(),
                        [&](const Entry& e) { return e.key == key; });
  };
  auto it = match();
  if (it == entries_.end()) {
    // First sighting: remembered (at most `capacity` such keys), run eagerly.
    const auto seen_once = std::count_if(entries_.begin(), entries_.end(),
                                         [](const Entry& e) { return e.exec == nullptr; });
    if (static_cast<size_t>(seen_once) >= capacity_) forget_least_recent(/*graphs=*/false);
    entries_.push_back(Entry{key, nullptr, uses_});
    record();
    return;
  }
  it->last_use = uses_;
  if (!it->exec) {
    // Second sighting: captured, keeping at most `capacity` graphs.
    const auto graphs = std::count_if(entries_.begin(), entries_.end(),
                                      [](const Entry& e) { return e.exec != nullptr; });
    if (static_cast<size_t>(graphs) >= capacity_) {
      forget_least_recent(/*graphs=*/true);
      it = match();
    }
    cudaGraph_t graph = nullptr;
    DS2_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      record();
    } catch (...) {
      cudaStreamEndCapture(stream, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    DS2_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    const cudaError_t err = cudaGraphInstantiate(&it->exec, graph, 0);
    cudaGraphDestroy(graph);
    DS2_CUDA_CHECK(err);
    ++captures_;
  }
  DS2_CUDA_CHECK(cudaGraphLaunch(it->exec, stream));
  ++replays_;
}

}  // namespace ds2
