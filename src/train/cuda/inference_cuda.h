// CudaInference: evaluation and transcription on the GPU: a CudaModel holding a copy of the
// host model's weights, run in inference mode batch by batch, logits copied back for decoding.
//
//   ds2::CudaInference gpu(am);      // uploads am.model's weights
//   am.inference = &gpu;             // evaluate()/transcribe_files() now run on the GPU
#pragma once

#include "core/cuda/context.h"
#include "nn/cuda/model_cuda.h"
#include "train/acoustic_model.h"
#include "train/inference.h"

namespace ds2 {

// The inference forward shared by CudaInference and the CUDA training engine.
const Sequences& cuda_inference_logits(CudaContext& ctx, CudaModel& model,
                                       const Sequences& features, DeviceSequences* staged,
                                       Sequences* logits);

class CudaInference : public InferenceEngine {
 public:
  explicit CudaInference(AcousticModel& am, int device = 0);
  const Sequences& logits(const Sequences& features) override;
  std::string describe() const override { return "cuda: " + ctx_.description(); }

 private:
  CudaContext ctx_;
  CudaModel model_;
  DeviceSequences features_;
  Sequences logits_;
};

}  // namespace ds2
