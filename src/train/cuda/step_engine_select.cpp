// Until the CUDA layers land, CUDA builds train on the CPU engine.
#include "core/error.h"
#include "train/step_engine_cpu.h"

namespace ds2 {
std::unique_ptr<StepEngine> make_step_engine(const Config& cfg, AcousticModel& am,
                                             bool use_average) {
  DS2_CHECK(cfg.run.device != "cuda", cfg.source << ": key 'run.device': cuda training is not "
                                                    "implemented yet; use cpu or auto");
  return std::make_unique<CpuStepEngine>(cfg, am, use_average);
}
}  // namespace ds2
