#include "train/step_engine_cpu.h"

#include <algorithm>
#include <chrono>
#include <functional>

#include "core/blas_kernels.h"
#include "core/cpu_threads.h"
#include "core/device.h"
#include "core/dropout_mask.h"
#include "core/error.h"
#include "nn/dropout.h"

namespace ds2 {

CpuStepEngine::CpuStepEngine(const Config& cfg, AcousticModel& am, bool use_average)
    : am_(am), optimizer_(make_optimizer(cfg.optim, am.model->parameters().num_parameters())) {
  DS2_CHECK(cfg.train.precision == "fp32",
            cfg.source << ": key 'train.precision': " << cfg.train.precision
                       << " needs the CUDA backend (bf16 tensor-core GEMMs); the CPU backend "
                          "trains in fp32");
  if (use_average) average_ = am.model->parameters().values();
}

std::string CpuStepEngine::describe() const {
  return "cpu, " + std::to_string(cpu_threads()) + " threads, " + blas_kernels();
}

namespace {
double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

void CpuStepEngine::forward_loss(const Batch& batch, std::vector<double>* losses) {
  am_.model->forward(batch.features, /*training=*/true);
  const auto start = std::chrono::steady_clock::now();
  ctc_loss(am_.model->logits(), batch.labels, losses, &grad_, &ctc_workspace_);
  if (timing_) ctc_ms_ += ms_since(start);
}

template <typename RunBackward>
double CpuStepEngine::reduce_and_clip(RunBackward run_backward, float loss_scale, double max_norm) {
  ParameterStore& store = am_.model->parameters();
  store.zero_grads();
  if (exchange_) exchange_->begin();
  run_backward();
  if (exchange_) exchange_->finish();
  // The reduced sums are the same on every rank, so are the norm and every decision made on it.
  return unscale_and_clip(store.grads(), loss_scale, max_norm);
}

double CpuStepEngine::backward(float grad_scale, float loss_scale, double max_norm) {
  return reduce_and_clip(
      [&] {
        // One product: (1 / n) * 2^k is exact, so each gradient is rounded once, as without a
        // loss scale.
        const float scale = grad_scale * loss_scale;
        float* g = grad_.data.data();
        for (int64_t i = 0; i < grad_.data.numel(); ++i) g[i] *= scale;
        am_.model->backward(grad_, exchange_.get());
      },
      loss_scale, max_norm);
}

double CpuStepEngine::backward_without_data(float loss_scale, double max_norm) {
  return reduce_and_clip(
      [&] {
        if (exchange_) exchange_->all_gradients_ready();
      },
      loss_scale, max_norm);
}

void CpuStepEngine::join(dist::World& world, const DistConfig& cfg) {
  if (!world.distributed()) return;
  world_ = &world;
  exchange_ = dist::make_mpi_gradient_exchange(world, am_.model->parameters().grads().data(),
                                               gradient_buckets(*am_.model, cfg),
                                               cfg.reduce_dtype == "bf16");
}

uint64_t CpuStepEngine::weights_hash() {
  const Tensor& live = swapped_ ? average_ : am_.model->parameters().values();
  return hash_bytes(live.data(), sizeof(float) * live.numel());
}

void CpuStepEngine::salt_dropout(uint64_t salt) {
  for (const auto& layer : am_.model->layers())
    if (auto* drop = dynamic_cast<Dropout*>(layer.get()))
      drop->reseed(salted_dropout_seed(drop->next_seed(), salt));
}

void CpuStepEngine::optimizer_step(double lr) {
  const auto start = std::chrono::steady_clock::now();
  ParameterStore& store = am_.model->parameters();
  apply_weight_masks(masks_, store.grads().data());
  optimizer_->step(store.values(), store.grads(), lr);
  // Weight decay and Adam's momentum would move pruned weights off 0 again.
  apply_weight_masks(masks_, store.values().data());
  if (timing_) optimizer_ms_ += ms_since(start);
}

void CpuStepEngine::set_weight_masks(const std::vector<WeightMask>& masks) {
  DS2_CHECK(!swapped_, "set_weight_masks inside a host view");
  masks_ = masks;
  apply_weight_masks(masks_, am_.model->parameters().values().data());
  // The average of a weight that is 0 from now on decays towards 0 but never reaches it; masking
  // it keeps what checkpoints and exports hold sparse.
  if (average_.numel() > 0) apply_weight_masks(masks_, average_.data());
}

const float* CpuStepEngine::live_weights() {
  DS2_CHECK(!swapped_, "live_weights inside a host view");
  return am_.model->parameters().values().data();
}

void CpuStepEngine::set_timing(bool on) {
  timing_ = on;
  ctc_ms_ = optimizer_ms_ = 0;
  am_.model->set_timing(on);
}

std::map<std::string, double> CpuStepEngine::part_times() {
  std::map<std::string, double> parts = am_.model->layer_times();
  parts["CTC"] = ctc_ms_;
  parts["Optimizer"] = optimizer_ms_;
  return parts;
}

std::vector<LayerCost> CpuStepEngine::layer_costs() {
  std::vector<LayerCost> costs;
  const auto& layers = am_.model->layers();
  const std::vector<double>& ms = am_.model->per_layer_ms();
  for (size_t i = 0; i < layers.size(); ++i)
    costs.push_back({layers[i]->name(), i < ms.size() ? ms[i] : 0.0, -1});
  return costs;
}

void CpuStepEngine::update_average(float a, float b) {
  DS2_CHECK(average_.numel() > 0, "update_average: the engine was made without an average");
  const float* p = am_.model->parameters().values().data();
  float* e = average_.data();
  for (int64_t i = 0; i < average_.numel(); ++i) e[i] = a * e[i] + b * p[i];
}

// Swapping contents in and out costs no third buffer and restores the live weights exactly.
void CpuStepEngine::swap_average() {
  Tensor& values = am_.model->parameters().values();
  std::swap_ranges(average_.data(), average_.data() + average_.numel(), values.data());
}

void CpuStepEngine::begin_host_view(bool averaged) {
  swapped_ = averaged && average_.numel() > 0;
  if (swapped_) swap_average();
  Tensor& buffers = am_.model->parameters().buffers();
  if (world_) average_over_ranks(*world_, buffers.data(), buffers.numel());
}

void CpuStepEngine::end_host_view() {
  if (swapped_) swap_average();
  swapped_ = false;
}

void CpuStepEngine::save_state(Checkpoint* ck) {
  const Tensor& values = am_.model->parameters().values();
  // Inside a host view the average sits in the model and the live weights in average_.
  const Tensor& live = swapped_ ? average_ : values;
  ck->tensors.push_back(make_flat_state("train.values", live.data(), live.numel()));
  if (average_.numel() > 0) {
    const Tensor& avg = swapped_ ? values : average_;
    ck->tensors.push_back(make_flat_state("train.average", avg.data(), avg.numel()));
  }
  for (const auto& [name, tensor] : optimizer_->state())
    ck->tensors.push_back(make_flat_state("train." + name, tensor->data(), tensor->numel()));
  ck->metadata["train.optimizer_steps"] = std::to_string(optimizer_->steps());
  for (const auto& layer : am_.model->layers())
    if (const auto* drop = dynamic_cast<const Dropout*>(layer.get()))
      set_checkpoint_dropout_seed(ck, drop->name(), drop->next_seed());
}

void CpuStepEngine::load_state(const Checkpoint& ck) {
  DS2_CHECK(!swapped_, "load_state inside a host view");
  Tensor& values = am_.model->parameters().values();
  const NamedTensor& live = flat_state(ck, "train.values", values.numel());
  std::copy(live.data.begin(), live.data.end(), values.data());
  if (average_.numel() > 0) {
    const NamedTensor& avg = flat_state(ck, "train.average", average_.numel());
    std::copy(avg.data.begin(), avg.data.end(), average_.data());
  }
  for (const auto& [name, tensor] : optimizer_->state()) {
    const NamedTensor& t = flat_state(ck, "train." + name, tensor->numel());
    std::copy(t.data.begin(), t.data.end(), tensor->data());
  }
  optimizer_->set_steps(std::stoll(ck.meta("train.optimizer_steps")));
  for (const auto& layer : am_.model->layers())
    if (auto* drop = dynamic_cast<Dropout*>(layer.get()))
      drop->reseed(checkpoint_dropout_seed(ck, drop->name()));
}

#ifndef DS2_HAVE_CUDA
std::unique_ptr<StepEngine> make_step_engine(const Config& cfg, AcousticModel& am, bool use_average,
                                             int /*local_rank*/) {
  DS2_CHECK(cfg.run.device != "cuda", cfg.source << ": key 'run.device': cuda, but this ds2 was "
                                                    "built without CUDA (DS2_WITH_CUDA=OFF or no "
                                                    "nvcc); use cpu or auto");
  return std::make_unique<CpuStepEngine>(cfg, am, use_average);
}
#endif

}  // namespace ds2
