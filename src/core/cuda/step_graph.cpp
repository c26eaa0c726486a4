#include "core/cuda/step_graph.h"

#include "core/cuda/check.h"

namespace ds2 {

StepGraph::~StepGraph() {
  reset();
}

void StepGraph::reset() {
  if (exec_) cudaGraphExecDestroy(exec_);  // errors ignored: also called from the destructor
  exec_ = nullptr;
}

void StepGraph::run(const std::vector<int64_t>& key, cudaStream_t stream,
                    const std::function<void()>& record) {
  if (!enabled_) {
    record();
    return;
  }
  if (key != key_) {
    reset();
    key_ = key;
    record();
    return;
  }
  if (!exec_) {
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
    const cudaError_t err = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    DS2_CUDA_CHECK(err);
  }
  DS2_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
  ++replays_;
}

}  // namespace ds2
