#include "train/cuda/inference_cuda.h"

#include "core/error.h"

namespace ds2 {

const Sequences& cuda_inference_logits(CudaContext& ctx, CudaModel& model,
                                       const Sequences& features, DeviceSequences* staged,
                                       Sequences* logits) {
  upload(features, *staged, ctx.stream());
  model.forward(*staged, /*training=*/false);
  download(model.logits(), *logits, ctx.stream());
  return *logits;
}

CudaInference::CudaInference(AcousticModel& am, int device)
    : ctx_(device), model_(ctx_, *am.model) {}

const Sequences& CudaInference::logits(const Sequences& features) {
  return cuda_inference_logits(ctx_, model_, features, &features_, &logits_);
}

std::unique_ptr<InferenceEngine> make_inference_engine(AcousticModel& am,
                                                       const std::string& device) {
  DS2_CHECK(device == "auto" || device == "cpu" || device == "cuda",
            "device must be auto, cpu or cuda, got '" << device << "'");
  if (device == "cpu") return nullptr;
  std::string why;
  if (!cuda_available(&why)) {
    DS2_CHECK(device != "cuda", "device cuda: " << why << "; use cpu or auto");
    return nullptr;
  }
  return std::make_unique<CudaInference>(am);
}

}  // namespace ds2
