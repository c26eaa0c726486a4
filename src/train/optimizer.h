// Optimizers over the model's flat parameter buffer: SGD with Nesterov momentum and Adam (with
// decoupled weight decay), plus the global-norm gradient clipping that precedes them.
//
//   auto opt = ds2::make_optimizer(cfg.optim, store.num_parameters());
//   double norm = ds2::clip_grad_norm(store.grads(), cfg.optim.grad_clip);
//   double norm = ds2::unscale_and_clip(store.grads(), loss_scale, cfg.optim.grad_clip);
//   opt->step(store.values(), store.grads(), lr);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "train/config.h"

namespace ds2 {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void step(Tensor& params, const Tensor& grads, double lr) = 0;
  // Named state tensors (momentum, moments) for checkpoints; same length as the parameters.
  virtual std::vector<std::pair<std::string, Tensor*>> state() = 0;
  int64_t steps() const { return steps_; }
  void set_steps(int64_t s) { steps_ = s; }

 protected:
  int64_t steps_ = 0;
};

std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& cfg, int64_t num_parameters);

// L2 norm of the whole gradient (double accumulation); non-finite if any element is.
double grad_norm(const Tensor& grads);
// Scales the gradient so its global norm is at most max_norm (0 = no clipping). Returns the norm
// before clipping.
double clip_grad_norm(Tensor& grads, double max_norm);

// Loss scaling and clipping in one pass. For gradients computed from a loss multiplied by
// `loss_scale`, whose L2 norm is `scaled_norm`: sets *norm to the true (unscaled) norm and
// returns the factor that unscales them and clips them to `max_norm` (0 = no clipping), or
// exactly 1 when no pass is needed (nothing to unscale or clip, or a non-finite norm: that step
// is skipped). With a power-of-two loss_scale the result is bit-identical to clipping gradients
// computed without the scale, as long as factor and gradients stay normal floats.
float unscale_clip_factor(double scaled_norm, float loss_scale, double max_norm, double* norm);
// unscale_clip_factor applied to `grads`; returns the true norm (clip_grad_norm with scale 1).
double unscale_and_clip(Tensor& grads, float loss_scale, double max_norm);

// Learning rate at `step` (0-based) for a run of `total_steps` with `steps_per_epoch`.
double learning_rate(const OptimConfig& cfg, int64_t step, int64_t total_steps,
                     int64_t steps_per_epoch);

}  // namespace ds2
