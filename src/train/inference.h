// InferenceEngine: where evaluation and transcription run the network. Without one an
// AcousticModel runs its host model (the CPU); a GPU engine installed in it
// (AcousticModel::inference) runs the same weights on the device and hands back the logits.
//
//   auto gpu = ds2::make_inference_engine(am, "auto");   // nullptr: stay on the CPU
//   am.inference = gpu.get();
//   const ds2::Sequences& logits = am.forward_inference(batch.features);
#pragma once

#include <memory>
#include <string>

#include "nn/sequences.h"

namespace ds2 {

struct AcousticModel;

class InferenceEngine {
 public:
  virtual ~InferenceEngine() = default;
  // Inference-mode forward of `features` {T, B, F}: logits {T', B, K} with lengths, valid until
  // the next call.
  virtual const Sequences& logits(const Sequences& features) = 0;
  virtual std::string describe() const = 0;
};

// An engine on the GPU for `device` ("cuda": required, "auto": when one is usable) holding a
// copy of am's current weights, or nullptr for "cpu" and "auto" without a GPU.
std::unique_ptr<InferenceEngine> make_inference_engine(AcousticModel& am,
                                                       const std::string& device);

}  // namespace ds2
