// The CPU StepEngine: the model, CTC loss and optimizer of src/nn, src/ctc and src/train on the
// host (OpenBLAS GEMMs). The reference every other engine is checked against.
//
//   CpuStepEngine engine(cfg, am, /*use_average=*/true);
#pragma once

#include "ctc/ctc_loss.h"
#include "dist/gradient_exchange.h"
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
  double backward(float grad_scale, float loss_scale, double max_norm) override;
  double backward_without_data(float loss_scale, double max_norm) override;
  void join(dist::World& world, const DistConfig& cfg) override;
  double exposed_comm_ms() override { return exchange_ ? exchange_->exposed_wait_ms() : 0; }
  uint64_t weights_hash() override;
  void salt_dropout(uint64_t salt) override;
  void optimizer_step(double lr) override;
  void set_weight_masks(const std::vector<WeightMask>& masks) override;
  const float* live_weights() override;
  void update_average(float a, float b) override;
  void begin_host_view(bool averaged) override;
  void end_host_view() override;
  void save_state(Checkpoint* ck) override;
  void load_state(const Checkpoint& ck) override;
  void set_timing(bool on) override;
  std::map<std::string, double> part_times() override;
  std::vector<LayerCost> layer_costs() override;

 private:
  void swap_average();
  // Zeroed gradients, the listener's buckets launched by `run_backward`, reduced, unscaled by
  // `loss_scale` and clipped.
  template <typename RunBackward>
  double reduce_and_clip(RunBackward run_backward, float loss_scale, double max_norm);

  AcousticModel& am_;
  std::unique_ptr<Optimizer> optimizer_;
  CtcWorkspace ctc_workspace_;
  Sequences grad_;
  Tensor average_;
  dist::World* world_ = nullptr;  // set by join() in a run of several ranks
  std::unique_ptr<dist::GradientExchange> exchange_;
  std::vector<WeightMask> masks_;  // set_weight_masks(); empty without pruning
  bool swapped_ = false;
  bool timing_ = false;
  double ctc_ms_ = 0, optimizer_ms_ = 0;
};

}  // namespace ds2
