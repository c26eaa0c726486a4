// CudaCtcLoss: the GPU CTC loss for the trainer (kernels/ctc_loss.h) with host labels and
// DeviceSequences, the same contract as the CPU's ctc_loss(Sequences...) in ctc/ctc_loss.h. It
// owns grow-only device buffers (workspace, labels, losses) and pinned host staging, so once the
// largest batch has been seen a step allocates nothing.
//
//   ds2::CudaCtcLoss ctc(ctx);
//   std::vector<double> losses;                   // host, one per utterance (+inf: no alignment)
//   ds2::DeviceSequences grad;                     // d loss / d logits, padding frames 0
//   ctc.compute(model_logits /* {T, B, K} */, batch.labels, &losses, &grad /* or nullptr */);
//   const double* on_device = ctc.device_losses(); // the same losses, still on the GPU
//
// compute() waits for the stream once, to hand the losses to the host (the trainer needs them
// every step to decide on skips); everything else is queued on ctx.stream().
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/cuda/context.h"
#include "core/cuda/device_array.h"
#include "nn/cuda/device_sequences.h"

namespace ds2 {

class CudaCtcLoss {
 public:
  explicit CudaCtcLoss(const CudaContext& ctx) : stream_(ctx.stream()) {}
  ~CudaCtcLoss();
  CudaCtcLoss(const CudaCtcLoss&) = delete;
  CudaCtcLoss& operator=(const CudaCtcLoss&) = delete;

  // logits: data {T, B, K} (raw activations) with lengths; labels: B sequences over 1..K-1 (may
  // be empty). `losses` gets B values; `gradient`, when not null, gets data {T, B, K} and the
  // logits' lengths (it may be `&logits` itself: the gradient then overwrites the logits). Throws
  // ds2::Error naming the utterance on a bad length or label, never on an infeasible alignment.
  void compute(const DeviceSequences& logits, const std::vector<std::vector<int>>& labels,
               std::vector<double>* losses, DeviceSequences* gradient);

  // The last compute()'s losses on the device ([B] doubles).
  const double* device_losses() const { return losses_.data(); }

 private:
  cudaStream_t stream_;
  DeviceArray<int> labels_;         // [B+1] offsets, then the labels concatenated
  DeviceArray<double> losses_;      // [B]
  DeviceArray<uint8_t> workspace_;  // kernels::ctc_workspace_bytes
  int* host_labels_ = nullptr;      // pinned staging of labels_, one copy per call
  size_t host_labels_capacity_ = 0;
  double* host_losses_ = nullptr;  // pinned destination of the losses
  size_t host_losses_capacity_ = 0;
};

}  // namespace ds2
