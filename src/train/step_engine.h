// StepEngine: where a training step runs (the CPU backend, or a CUDA device), behind one
// interface so the trainer loop, its logging, skipping and checkpointing are the same on both.
// The host AcousticModel stays the reference copy of the network's structure; an engine may keep
// the live weights elsewhere (on the GPU) and shows them to the host between begin_host_view()
// and end_host_view(), for evaluation and checkpoints.
//
//   auto engine = ds2::make_step_engine(cfg, am);        // run.device: auto | cpu | cuda
//   engine->reserve(largest_batch);                     // every buffer at its final size
//   engine->forward_loss(batch, &losses);
//   double norm = engine->backward(1.0f / finite, loss_scale, cfg.optim.grad_clip);
//   engine->optimizer_step(lr);
//   engine->update_average(a, b);
//   engine->begin_host_view(/*averaged=*/true);  evaluate(am, ...);  engine->end_host_view();
//
// Data-parallel training: engine->join(world, cfg.dist) once, before reserve(); from then on
// backward() sums the gradients over all ranks (bucketed allreduce overlapping backward), and a
// rank whose share of a global batch is empty calls backward_without_data() instead.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/loader.h"
#include "dist/bucket_plan.h"
#include "dist/world.h"
#include "train/acoustic_model.h"
#include "train/checkpoint.h"
#include "train/pruning.h"

namespace ds2 {

// One layer's share of a step, for `ds2 bench step`.
struct LayerCost {
  std::string name;
  double ms = 0;              // forward + backward, summed since set_timing(true)
  int64_t device_bytes = -1;  // device memory the layer allocated (-1: no device)
};

class StepEngine {
 public:
  virtual ~StepEngine() = default;
  // "cpu, 2 threads" or "cuda: NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)".
  virtual std::string describe() const = 0;
  // Runs every buffer up to the size `largest` needs (a forward and backward whose effects on
  // weights, gradients and statistics are undone), so the training loop never allocates.
  virtual void reserve(const Batch& largest) = 0;
  // Training-mode forward and CTC loss: losses[i] for utterance i (+inf when infeasible).
  virtual void forward_loss(const Batch& batch, std::vector<double>* losses) = 0;
  // Backward of the last forward_loss with dL/dlogits scaled by grad_scale * loss_scale
  // (grad_scale: 1 / utterances, for the mean; loss_scale: dynamic loss scaling's power of two,
  // 1 without it), then, after the allreduce, one pass that unscales by loss_scale and clips to
  // `max_norm` (0 = none) (unscale_clip_factor). Returns the true norm before clipping, the
  // scaled gradients' norm / loss_scale: non-finite if any gradient is (an overflow, with a
  // loss scale). With a power-of-two loss_scale the gradients left for the optimizer are
  // bit-identical to those of loss_scale 1, unless the scaled ones overflow or the unscaled
  // ones fall below float's normal range.
  virtual double backward(float grad_scale, float loss_scale, double max_norm) = 0;
  // For a rank with no utterances in this step: zero gradients join the allreduce, then the same
  // unscaling by `loss_scale` (the one the other ranks used) and clipping; returns the true norm
  // of the reduced gradients like backward(), so every rank decides and updates identically.
  virtual double backward_without_data(float loss_scale, double max_norm) = 0;
  virtual void optimizer_step(double lr) = 0;
  // Pruning masks (train/pruning.h): from this call on, optimizer_step zeroes the masked
  // gradients before the update (so optimizer moments of pruned weights get no new input) and the
  // masked weights after it (so they stay exactly 0). The live weights and the average are masked
  // at once. The mask bytes are read here: call again after they change, with the same regions
  // (device memory is sized by the first call, made before reserve()). Outside a host view.
  virtual void set_weight_masks(const std::vector<WeightMask>& masks) = 0;
  // The live weights on the host, flat in the parameter store's layout (for recomputing masks);
  // valid until the next call into the engine. Outside a host view.
  virtual const float* live_weights() = 0;
  // Weight average (EMA): average = a * average + b * weights. Starts equal to the weights.
  virtual void update_average(float a, float b) = 0;
  // Until end_host_view(), the host model holds the averaged (or live) weights and the live
  // batch-norm statistics. The live weights are untouched by this round trip.
  virtual void begin_host_view(bool averaged) = 0;
  virtual void end_host_view() = 0;

  // Training state a resume needs beyond what the checkpoint's named weights show (which, with
  // weight averaging, are the average): the live weights ("train.values"), the weight average
  // ("train.average"), the optimizer's state ("train.<name>", metadata "train.optimizer_steps")
  // and the dropout masks' random streams (metadata "train.dropout.<layer>"). Valid inside and
  // outside a host view.
  virtual void save_state(Checkpoint* ck) = 0;
  // Restores what save_state wrote, after the host model got the checkpoint's buffers
  // (AcousticModel::load_weights). Throws naming the checkpoint and tensor on a mismatch.
  virtual void load_state(const Checkpoint& ck) = 0;

  // Joins a data-parallel run (nothing happens with one rank): backward() then sums gradients
  // over the ranks of `world`, and begin_host_view() averages batch-norm statistics over them.
  virtual void join(dist::World& world, const DistConfig& cfg) = 0;
  // Milliseconds of the last backward() spent waiting for gradient communication that backward
  // did not hide; 0 with one rank. On the GPU, valid after synchronize().
  virtual double exposed_comm_ms() { return 0; }
  // A hash of the live weights, to check that ranks hold identical copies (dist.check_every).
  virtual uint64_t weights_hash() = 0;
  // Mixes `salt` into every dropout stream, so ranks draw different masks.
  virtual void salt_dropout(uint64_t salt) = 0;

  // How the layers run where there is a choice (persistent or GEMM recurrences), one line per
  // layer, after reserve(); empty when there is no choice.
  virtual std::string describe_layers() const { return ""; }

  // Waits until all queued work is done (benchmarks time whole steps with it).
  virtual void synchronize() {}
  // Per-part timing for benchmarks: when on, milliseconds spent per layer kind ("Conv2d",
  // "RNN", ...) and step part ("CTC", "Optimizer", "Input copy"), summed since turned on. Empty
  // where the engine cannot time its parts.
  virtual void set_timing(bool /*on*/) {}
  virtual std::map<std::string, double> part_times() { return {}; }
  // The same time per layer, in layer order, with each layer's device memory.
  virtual std::vector<LayerCost> layer_costs() { return {}; }
  // Device allocations (cudaMalloc) inside training steps since reserve() returned: 0 in a
  // healthy run. -1 where there is no device.
  virtual int64_t allocations_since_reserve() const { return -1; }
  // Device memory at its peak so far (bytes), or -1 where there is no device.
  virtual int64_t peak_device_bytes() const { return -1; }
};

// The engine for cfg.run.device: "cpu", "cuda" (an error when no GPU can be used) or "auto"
// (CUDA when built with it and a device is visible, else CPU). `use_average` allocates the EMA.
// `local_rank` (the rank among this host's ranks) picks the GPU: local_rank % visible devices.
std::unique_ptr<StepEngine> make_step_engine(const Config& cfg, AcousticModel& am, bool use_average,
                                             int local_rank = 0);

// Replaces values[0, count) by their mean over the ranks of `world` (batch-norm statistics).
void average_over_ranks(dist::World& world, float* values, int64_t count);
// A 64-bit FNV-1a hash of `size` bytes (weights_hash(), layout checks).
uint64_t hash_bytes(const void* data, size_t size);
// Gradient allreduce buckets of `model`'s flat gradient buffer, sized by dist.bucket_mb.
dist::BucketPlan gradient_buckets(const Model& model, const DistConfig& cfg);

// The flat tensor `name` of `ck`, checked to hold `numel` values; throws naming both.
const NamedTensor& flat_state(const Checkpoint& ck, const std::string& name, int64_t numel);
NamedTensor make_flat_state(const std::string& name, const float* data, int64_t numel);
// The next mask seed of dropout layer `layer` in `ck` (metadata "train.dropout.<layer>", the
// seed in decimal, as both engines write it; nn/dropout.h's dropout_seed_from_state also reads
// older CPU checkpoints); the reader throws naming the key when it is not a valid state.
void set_checkpoint_dropout_seed(Checkpoint* ck, const std::string& layer, uint64_t seed);
uint64_t checkpoint_dropout_seed(const Checkpoint& ck, const std::string& layer);

// A batch of `batch` utterances of `frames` feature frames (random features, labels of
// `label_length` cycling through the alphabet) for reserve() and benchmarks; audio_seconds is
// left 0 for the caller, who knows the hop.
Batch synthetic_batch(int batch, int frames, int features, int label_length, int num_classes,
                      uint64_t seed);

}  // namespace ds2
