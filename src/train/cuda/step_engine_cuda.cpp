#include "train/cuda/step_engine_cuda.h"

#include <cmath>
#include <cstring>
#include <map>

#include "core/cuda/check.h"
#include "core/dropout_mask.h"
#include "core/precision.h"
#include "dist/cuda/nccl_gradient_exchange.h"
#include "kernels/elementwise.h"
#include "kernels/optimizer.h"
#include "train/cuda/inference_cuda.h"
#include "train/optimizer.h"
#include "train/step_engine_cpu.h"

namespace ds2 {

CudaStepEngine::CudaStepEngine(const Config& cfg, AcousticModel& am, bool use_average, int device)
    : optim_(cfg.optim), am_(am), ctx_(device), ctc_(ctx_), use_average_(use_average) {
  DS2_CHECK(optim_.name == "adam" || optim_.name == "sgd",
            "key 'optim.name': unknown optimizer '" << optim_.name << "'");
  ctx_.set_matmul_precision(parse_precision(cfg.train.precision));
  model_ = std::make_unique<CudaModel>(ctx_, *am.model);
  model_->set_use_persistent(cfg.train.persistent_rnn);
  model_->set_use_wavefront(cfg.train.rnn_wavefront && cfg.train.persistent_rnn);
  model_->reseed_dropout(static_cast<uint64_t>(cfg.run.seed) * 7919u + 17u);
  const int64_t n = model_->params().num_parameters();
  moment1_.reserve(n);
  kernels::fill(moment1_.data(), n, 0.0f, ctx_.stream());
  if (optim_.name == "adam") {
    moment2_.reserve(n);
    kernels::fill(moment2_.data(), n, 0.0f, ctx_.stream());
  }
  if (use_average_) {
    average_.reserve(n);
    DS2_CUDA_CHECK(cudaMemcpyAsync(average_.data(), model_->params().values(), n * sizeof(float),
                                   cudaMemcpyDeviceToDevice, ctx_.stream()));
  }
  norm_scratch_.reserve(kernels::kSumSquaresPartials);
  norm_.reserve(1);
  DS2_CUDA_CHECK(cudaMallocHost(&norm_host_, sizeof(double)));
  ctx_.synchronize();
}

CudaStepEngine::~CudaStepEngine() {
  cudaStreamSynchronize(ctx_.stream());
  if (norm_host_) cudaFreeHost(norm_host_);
  if (part_begin_) cudaEventDestroy(part_begin_);
  if (part_end_) cudaEventDestroy(part_end_);
}

std::string CudaStepEngine::describe() const {
  return "cuda: " + ctx_.description() + ", " + precision_name(ctx_.matmul_precision()) +
         (ctx_.matmul_precision() == Precision::kBf16 ? " (mixed precision)" : "");
}

void CudaStepEngine::upload_features(const Batch& batch) {
  const Tensor& host = batch.features.data;
  features_.data.resize(host.shape());
  features_staging_.copy(host.data(), sizeof(float) * host.numel(), features_.data.data(),
                         ctx_.stream());
  features_.set_lengths(batch.features.lengths, ctx_.stream());
}

void CudaStepEngine::reserve(const Batch& largest) {
  // Batch-norm running statistics are the only state a forward changes: keep and restore them.
  DeviceParameters& p = model_->params();
  DeviceArray<float> saved(std::max<int64_t>(1, p.num_buffers()));
  DS2_CUDA_CHECK(cudaMemcpyAsync(saved.data(), p.buffers(), p.num_buffers() * sizeof(float),
                                 cudaMemcpyDeviceToDevice, ctx_.stream()));
  std::vector<double> losses;
  forward_loss(largest, &losses);
  backward(1.0f, 1.0f, 0.0);
  DS2_CUDA_CHECK(cudaMemcpyAsync(p.buffers(), saved.data(), p.num_buffers() * sizeof(float),
                                 cudaMemcpyDeviceToDevice, ctx_.stream()));
  p.zero_grads();
  ctx_.synchronize();
  step_allocations_ = 0;
}

namespace {
NamedTensor download_state(const std::string& name, const float* device, int64_t n,
                           cudaStream_t stream) {
  NamedTensor t{name, Shape{n}, std::vector<float>(static_cast<size_t>(n))};
  download(device, n, t.data.data(), stream);
  return t;
}
}  // namespace

// The optimizer state carries the CPU optimizers' names, so a run can resume on either engine.
void CudaStepEngine::save_state(Checkpoint* ck) {
  DeviceParameters& p = model_->params();
  const int64_t n = p.num_parameters();
  const cudaStream_t s = ctx_.stream();
  // Inside a host view the average sits in the model's values and the live weights in average_.
  const float* live = average_swapped_ ? average_.data() : p.values();
  ck->tensors.push_back(download_state("train.values", live, n, s));
  if (use_average_)
    ck->tensors.push_back(
        download_state("train.average", average_swapped_ ? p.values() : average_.data(), n, s));
  if (optim_.name == "adam") {
    ck->tensors.push_back(download_state("train.adam.m", moment1_.data(), n, s));
    ck->tensors.push_back(download_state("train.adam.v", moment2_.data(), n, s));
  } else {
    ck->tensors.push_back(download_state("train.sgd.velocity", moment1_.data(), n, s));
  }
  ck->metadata["train.optimizer_steps"] = std::to_string(optimizer_steps_);
  for (const auto& [name, seed] : model_->dropout_seeds())
    set_checkpoint_dropout_seed(ck, name, seed);
}

void CudaStepEngine::load_state(const Checkpoint& ck) {
  DS2_CHECK(!average_swapped_, "load_state inside a host view");
  DeviceParameters& p = model_->params();
  const int64_t n = p.num_parameters();
  const cudaStream_t s = ctx_.stream();
  p.upload_from(am_.model->parameters());  // the checkpoint's batch-norm statistics
  upload(flat_state(ck, "train.values", n).data.data(), n, p.values(), s);
  if (use_average_) upload(flat_state(ck, "train.average", n).data.data(), n, average_.data(), s);
  if (optim_.name == "adam") {
    upload(flat_state(ck, "train.adam.m", n).data.data(), n, moment1_.data(), s);
    upload(flat_state(ck, "train.adam.v", n).data.data(), n, moment2_.data(), s);
  } else {
    upload(flat_state(ck, "train.sgd.velocity", n).data.data(), n, moment1_.data(), s);
  }
  optimizer_steps_ = std::stoll(ck.meta("train.optimizer_steps"));
  std::map<std::string, uint64_t> seeds;
  // Both engines write the next mask seed, so either's checkpoint continues here exactly.
  for (const auto& entry : model_->dropout_seeds())
    seeds[entry.first] = checkpoint_dropout_seed(ck, entry.first);
  model_->set_dropout_seeds(seeds);
  ctx_.synchronize();  // the checkpoint's host vectors may go away after this returns
}

std::vector<LayerCost> CudaStepEngine::layer_costs() {
  std::vector<LayerCost> costs;
  const auto& layers = am_.model->layers();
  const std::vector<double> ms = model_->per_layer_ms();
  const std::vector<int64_t>& bytes = model_->layer_device_bytes();
  for (size_t i = 0; i < layers.size(); ++i)
    costs.push_back({layers[i]->name(), ms[i], i < bytes.size() ? bytes[i] : 0});
  return costs;
}

int64_t CudaStepEngine::allocations_since_reserve() const {
  return step_allocations_;
}

int64_t CudaStepEngine::peak_device_bytes() const {
  return device_bytes_peak();
}

void CudaStepEngine::set_timing(bool on) {
  timing_ = on;
  ctc_ms_ = optimizer_ms_ = 0;
  model_->set_timing(on);
  if (on && !part_begin_) {
    DS2_CUDA_CHECK(cudaEventCreate(&part_begin_));
    DS2_CUDA_CHECK(cudaEventCreate(&part_end_));
  }
}

void CudaStepEngine::time_part_begin() {
  if (timing_) DS2_CUDA_CHECK(cudaEventRecord(part_begin_, ctx_.stream()));
}

void CudaStepEngine::time_part_end(double* total_ms) {
  if (!timing_) return;
  DS2_CUDA_CHECK(cudaEventRecord(part_end_, ctx_.stream()));
  DS2_CUDA_CHECK(cudaEventSynchronize(part_end_));
  float ms = 0;
  DS2_CUDA_CHECK(cudaEventElapsedTime(&ms, part_begin_, part_end_));
  *total_ms += ms;
}

std::map<std::string, double> CudaStepEngine::part_times() {
  std::map<std::string, double> parts = model_->layer_times();
  parts["CTC"] = ctc_ms_;
  parts["Optimizer"] = optimizer_ms_;
  return parts;
}

void CudaStepEngine::forward_loss(const Batch& batch, std::vector<double>* losses) {
  allocations_at_step_start_ = device_allocations();
  upload_features(batch);
  model_->forward(features_, /*training=*/true);
  time_part_begin();
  ctc_.compute(model_->logits(), batch.labels, losses, &grad_logits_);
  time_part_end(&ctc_ms_);
}

template <typename RunBackward>
double CudaStepEngine::reduce_and_clip(RunBackward run_backward, float loss_scale,
                                       double max_norm) {
  DeviceParameters& p = model_->params();
  p.zero_grads();
  if (exchange_) exchange_->begin();
  run_backward();
  if (exchange_) exchange_->finish();
  const int64_t n = p.num_parameters();
  kernels::sum_squares(p.grads(), n, norm_scratch_.data(), norm_.data(), ctx_.stream());
  DS2_CUDA_CHECK(cudaMemcpyAsync(norm_host_, norm_.data(), sizeof(double), cudaMemcpyDeviceToHost,
                                 ctx_.stream()));
  if (world_) {
    // The wait includes the allreduce, which a dead or hung peer never finishes.
    dist::Watchdog::Scope watched(*world_->watchdog(), "gradient allreduce", world_->step());
    ctx_.synchronize();
  } else {
    ctx_.synchronize();
  }
  // The norm of the allreduced gradients is the same on every rank, so is every decision on it.
  double norm = 0;
  // The optimizer step applies the factor as it reads each gradient (one pass over them less).
  grad_factor_ = unscale_clip_factor(std::sqrt(*norm_host_), loss_scale, max_norm, &norm);
  return norm;
}

double CudaStepEngine::backward(float grad_scale, float loss_scale, double max_norm) {
  return reduce_and_clip(
      [&] {
        // One product: (1 / n) * 2^k is exact, so each gradient is rounded once, as without a
        // loss scale.
        kernels::scale(grad_logits_.data.data(), grad_logits_.data.numel(), grad_scale * loss_scale,
                       ctx_.stream());
        model_->backward(grad_logits_, exchange_.get());
      },
      loss_scale, max_norm);
}

double CudaStepEngine::backward_without_data(float loss_scale, double max_norm) {
  allocations_at_step_start_ = device_allocations();
  return reduce_and_clip(
      [&] {
        if (exchange_) exchange_->all_gradients_ready();
      },
      loss_scale, max_norm);
}

void CudaStepEngine::join(dist::World& world, const DistConfig& cfg) {
  if (!world.distributed()) return;
  world_ = &world;
  exchange_ = dist::make_nccl_gradient_exchange(world, ctx_, model_->params().grads(),
                                                gradient_buckets(*am_.model, cfg),
                                                cfg.reduce_dtype == "bf16", cfg.comm_ctas);
}

uint64_t CudaStepEngine::weights_hash() {
  DeviceParameters& p = model_->params();
  const int64_t n = p.num_parameters();
  host_scratch_.resize(static_cast<size_t>(n));
  download(average_swapped_ ? average_.data() : p.values(), n, host_scratch_.data(), ctx_.stream());
  return hash_bytes(host_scratch_.data(), sizeof(float) * n);
}

void CudaStepEngine::salt_dropout(uint64_t salt) {
  std::map<std::string, uint64_t> seeds = model_->dropout_seeds();
  for (auto& [name, seed] : seeds) seed = salted_dropout_seed(seed, salt);
  model_->set_dropout_seeds(seeds);
}

void CudaStepEngine::optimizer_step(double lr) {
  DeviceParameters& p = model_->params();
  const int64_t n = p.num_parameters();
  ++optimizer_steps_;
  time_part_begin();
  apply_masks(p.grads());
  if (optim_.name == "adam") {
    const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(optim_.beta1, optimizer_steps_)));
    const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(optim_.beta2, optimizer_steps_)));
    kernels::adam_step(p.values(), p.grads(), moment1_.data(), moment2_.data(), n,
                       static_cast<float>(lr), static_cast<float>(optim_.beta1),
                       static_cast<float>(optim_.beta2), static_cast<float>(optim_.eps),
                       static_cast<float>(1.0 - lr * optim_.weight_decay), c1, c2, grad_factor_,
                       ctx_.stream());
  } else {
    kernels::nesterov_sgd_step(p.values(), p.grads(), moment1_.data(), n, static_cast<float>(lr),
                               static_cast<float>(optim_.momentum),
                               static_cast<float>(optim_.weight_decay), grad_factor_,
                               ctx_.stream());
  }
  // Weight decay and Adam's momentum would move pruned weights off 0 again.
  apply_masks(p.values());
  time_part_end(&optimizer_ms_);
  // Evaluation between steps may size buffers for longer dev utterances; only what the training
  // steps themselves allocate counts.
  if (step_allocations_ >= 0)
    step_allocations_ += device_allocations() - allocations_at_step_start_;
}

void CudaStepEngine::apply_masks(float* data) {
  for (size_t k = 0; k < masks_.size(); ++k)
    kernels::apply_mask(data + masks_[k].offset, device_masks_.data() + mask_starts_[k],
                        data + masks_[k].offset, masks_[k].numel, ctx_.stream());
}

void CudaStepEngine::set_weight_masks(const std::vector<WeightMask>& masks) {
  DS2_CHECK(!average_swapped_, "set_weight_masks inside a host view");
  masks_ = masks;
  mask_starts_.clear();
  int64_t total = 0;
  for (const WeightMask& m : masks_) mask_starts_.push_back(total), total += m.numel;
  device_masks_.reserve(std::max<int64_t>(1, total));  // allocates on the first call only
  // live_weights() fills it at mask updates inside the loop: sized here, before the loop.
  host_scratch_.resize(static_cast<size_t>(model_->params().num_parameters()));
  // Synchronous copies from pageable memory: the host masks may change right after this call.
  for (size_t k = 0; k < masks_.size(); ++k)
    DS2_CUDA_CHECK(cudaMemcpyAsync(device_masks_.data() + mask_starts_[k], masks_[k].mask,
                                   masks_[k].numel, cudaMemcpyHostToDevice, ctx_.stream()));
  apply_masks(model_->params().values());
  // Recurrent layers may run their pruned U in the sparse persistent kernel (the masks name
  // exactly the RNN layers' U matrices).
  std::map<int64_t, const uint8_t*> by_offset;
  for (const WeightMask& m : masks_) by_offset[m.offset] = m.mask;
  model_->set_recurrent_masks(by_offset);
  // The average of a weight that is 0 from now on decays towards 0 but never reaches it; masking
  // it keeps what checkpoints and exports hold sparse.
  if (use_average_) apply_masks(average_.data());
  ctx_.synchronize();
}

const float* CudaStepEngine::live_weights() {
  DS2_CHECK(!average_swapped_, "live_weights inside a host view");
  const int64_t n = model_->params().num_parameters();
  host_scratch_.resize(static_cast<size_t>(n));
  download(model_->params().values(), n, host_scratch_.data(), ctx_.stream());
  return host_scratch_.data();
}

void CudaStepEngine::update_average(float a, float b) {
  DS2_CHECK(use_average_, "update_average: the engine was made without an average");
  kernels::average_update(average_.data(), model_->params().values(),
                          model_->params().num_parameters(), a, b, ctx_.stream());
}

void CudaStepEngine::begin_host_view(bool averaged) {
  DeviceParameters& p = model_->params();
  // The averaged weights take the live ones' place on the device (a swap, undone in
  // end_host_view), so evaluation runs on the GPU and checkpoints get the average.
  average_swapped_ = averaged && use_average_;
  if (average_swapped_)
    kernels::swap(p.values(), average_.data(), p.num_parameters(), ctx_.stream());
  p.download_to(am_.model->parameters());
  if (world_ && p.num_buffers() > 0) {
    // Each rank's running statistics saw only its share of the batches: use their mean.
    Tensor& buffers = am_.model->parameters().buffers();
    average_over_ranks(*world_, buffers.data(), buffers.numel());
    upload(buffers.data(), buffers.numel(), p.buffers(), ctx_.stream());
    ctx_.synchronize();
  }
  am_.inference = this;
}

void CudaStepEngine::end_host_view() {
  am_.inference = nullptr;
  if (average_swapped_)
    kernels::swap(model_->params().values(), average_.data(), model_->params().num_parameters(),
                  ctx_.stream());
  average_swapped_ = false;
}

const Sequences& CudaStepEngine::logits(const Sequences& features) {
  return cuda_inference_logits(ctx_, *model_, features, &inference_features_, &inference_logits_);
}

std::unique_ptr<StepEngine> make_step_engine(const Config& cfg, AcousticModel& am, bool use_average,
                                             int local_rank) {
  std::string why;
  const bool gpu = cuda_available(&why);
  int devices = 0;
  if (gpu) DS2_CUDA_CHECK(cudaGetDeviceCount(&devices));
  const int device = devices > 0 ? local_rank % devices : 0;
  if (cfg.run.device == "cuda") {
    DS2_CHECK(gpu, cfg.source << ": key 'run.device': cuda, but " << why << "; use cpu or auto");
    return std::make_unique<CudaStepEngine>(cfg, am, use_average, device);
  }
  if (cfg.run.device == "auto" && gpu)
    return std::make_unique<CudaStepEngine>(cfg, am, use_average, device);
  return std::make_unique<CpuStepEngine>(cfg, am, use_average);
}

}  // namespace ds2
