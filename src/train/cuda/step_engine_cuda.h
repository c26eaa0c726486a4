// The CUDA StepEngine: the whole training step on one GPU: features are packed into pinned host
// memory and copied asynchronously, then the conv front-end, RNNs, linear layer, CTC loss and
// gradient, gradient clipping, the optimizer and the weight average run on the device, on one
// stream, with fp32 master weights. The host sees two small results per step (the per-utterance
// losses and the gradient norm), which the trainer needs to decide on skips and to log.
//
//   CudaStepEngine engine(cfg, am, /*use_average=*/true);
//   engine.reserve(synthetic_batch(max_batch, max_frames, ...));   // no cudaMalloc after this
#pragma once

#include <memory>

#include "core/cuda/context.h"
#include "core/cuda/device_array.h"
#include "core/cuda/pinned_upload.h"
#include "ctc/cuda/ctc_loss_cuda.h"
#include "dist/gradient_exchange.h"
#include "nn/cuda/model_cuda.h"
#include "train/inference.h"
#include "train/step_engine.h"

namespace ds2 {

class CudaStepEngine : public StepEngine, public InferenceEngine {
 public:
  CudaStepEngine(const Config& cfg, AcousticModel& am, bool use_average, int device = 0);
  ~CudaStepEngine() override;

  std::string describe() const override;
  void reserve(const Batch& largest) override;
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
  // While a host view is open, evaluation runs on the GPU with the viewed weights.
  const Sequences& logits(const Sequences& features) override;
  void synchronize() override { ctx_.synchronize(); }
  std::string describe_layers() const override { return model_->describe_recurrences(); }
  void save_state(Checkpoint* ck) override;
  void load_state(const Checkpoint& ck) override;
  void set_timing(bool on) override;
  std::map<std::string, double> part_times() override;
  std::vector<LayerCost> layer_costs() override;
  int64_t allocations_since_reserve() const override;
  int64_t peak_device_bytes() const override;

  CudaContext& context() { return ctx_; }
  CudaModel& model() { return *model_; }

 private:
  void upload_features(const Batch& batch);
  // Zeroed gradients, the buckets launched by `run_backward`, reduced, the norm read back,
  // unscaled by `loss_scale` and clipped.
  template <typename RunBackward>
  double reduce_and_clip(RunBackward run_backward, float loss_scale, double max_norm);

  OptimConfig optim_;
  AcousticModel& am_;
  CudaContext ctx_;
  std::unique_ptr<CudaModel> model_;
  CudaCtcLoss ctc_;
  DeviceSequences features_, grad_logits_;
  PinnedUpload features_staging_;  // features copied through pinned memory: no host sync
  DeviceArray<float> moment1_, moment2_, average_;
  DeviceArray<double> norm_scratch_, norm_;
  double* norm_host_ = nullptr;  // pinned
  // The last backward's unscale-and-clip factor, applied by the optimizer step as it reads the
  // gradients.
  float grad_factor_ = 1.0f;
  int64_t optimizer_steps_ = 0;
  // Device allocations made inside training steps (forward_loss, backward, optimizer_step)
  // since reserve(); -1 before it.
  int64_t step_allocations_ = -1;
  int64_t allocations_at_step_start_ = 0;
  // Timing of the step parts outside the model (CTC, clipping + optimizer), by CUDA events.
  bool timing_ = false;
  cudaEvent_t part_begin_ = nullptr, part_end_ = nullptr;
  double ctc_ms_ = 0, optimizer_ms_ = 0;
  void time_part_begin();
  void time_part_end(double* total_ms);
  bool use_average_;
  bool average_swapped_ = false;
  dist::World* world_ = nullptr;  // set by join() in a run of several ranks
  std::unique_ptr<dist::GradientExchange> exchange_;
  std::vector<float> host_scratch_;  // weights_hash(), live_weights() and batch-norm averaging
  // Pruning masks: the regions of set_weight_masks() and their bytes, back to back on the device
  // (sized by the first call).
  std::vector<WeightMask> masks_;
  std::vector<int64_t> mask_starts_;
  DeviceArray<uint8_t> device_masks_;
  void apply_masks(float* data);
  DeviceSequences inference_features_;
  Sequences inference_logits_;
};

}  // namespace ds2
