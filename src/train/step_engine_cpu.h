// The CPU StepEngine: the model, CTC loss and optimizer of src/nn, src/ctc and src/train on the
// host (OpenBLAS GEMMs). The reference every other engine is checked against.
//
//   CpuStepEngine engine(cfg, am, /*use_average=*/true);
#pragma once

#include "ctc/ctc_loss.h"
#include "train/optimizer.h"
#include "train/step_engine.h"

namespace ds2 {

class CpuStepEngine : public StepEngine {
 public:
  CpuStepEngine(const Config& cfg, AcousticModel& am, bool use_average);

  std::string describe() const override;
  // Host buffers only grow and settle within the first steps; nothing to do up front.
  void reserve(const Batch& /*largest*/) override {}
  void forward_loss(const Batch& batch, std::vector<double>* losses) override;
  double backward(float loss_scale, double max_norm) override;
  void optimizer_step(double lr) override;
  void update_average(float a, float b) override;
  void begin_host_view(bool averaged) override;
  void end_host_view() override;
  void save_state(Checkpoint* ck) override;
  void load_state(const Checkpoint& ck) override;
  void set_timing(bool on) override;
  std::map<std::string, double> part_times() override;

 private:
  void swap_average();

  AcousticModel& am_;
  std::unique_ptr<Optimizer> optimizer_;
  CtcWorkspace ctc_workspace_;
  Sequences grad_;
  Tensor average_;
  bool swapped_ = false;
  bool timing_ = false;
  double ctc_ms_ = 0, optimizer_ms_ = 0;
};

}  // namespace ds2
