#include "train/optimizer.h"

#include <cmath>

#include "core/error.h"

namespace ds2 {
namespace {

// Nesterov momentum in the formulation of Sutskever et al. as used by PyTorch:
// v = mu*v + g;  p -= lr * (g + mu*v).
class NesterovSgd : public Optimizer {
 public:
  NesterovSgd(const OptimConfig& cfg, int64_t n) : cfg_(cfg), velocity_({n}) {}
  void step(Tensor& params, const Tensor& grads, double lr) override {
    const float mu = static_cast<float>(cfg_.momentum);
    const float wd = static_cast<float>(cfg_.weight_decay);
    const float rate = static_cast<float>(lr);
    float* p = params.data();
    const float* g = grads.data();
    float* v = velocity_.data();
    for (int64_t i = 0; i < params.numel(); ++i) {
      const float gi = g[i] + wd * p[i];
      v[i] = mu * v[i] + gi;
      p[i] -= rate * (gi + mu * v[i]);
    }
    ++steps_;
  }
  std::vector<std::pair<std::string, Tensor*>> state() override {
    return {{"sgd.velocity", &velocity_}};
  }

 private:
  OptimConfig cfg_;
  Tensor velocity_;
};

// Adam with bias correction; weight decay is decoupled (AdamW) so it does not pass through the
// adaptive scaling.
class Adam : public Optimizer {
 public:
  Adam(const OptimConfig& cfg, int64_t n) : cfg_(cfg), m_({n}), v_({n}) {}
  void step(Tensor& params, const Tensor& grads, double lr) override {
    ++steps_;
    const double b1 = cfg_.beta1, b2 = cfg_.beta2;
    const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(b1, steps_)));
    const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(b2, steps_)));
    const float fb1 = static_cast<float>(b1), fb2 = static_cast<float>(b2);
    const float eps = static_cast<float>(cfg_.eps), rate = static_cast<float>(lr);
    const float decay = static_cast<float>(1.0 - lr * cfg_.weight_decay);
    float* p = params.data();
    const float* g = grads.data();
    float* m = m_.data();
    float* v = v_.data();
    for (int64_t i = 0; i < params.numel(); ++i) {
      m[i] = fb1 * m[i] + (1 - fb1) * g[i];
      v[i] = fb2 * v[i] + (1 - fb2) * g[i] * g[i];
      p[i] = p[i] * decay - rate * (m[i] * c1) / (std::sqrt(v[i] * c2) + eps);
    }
  }
  std::vector<std::pair<std::string, Tensor*>> state() override {
    return {{"adam.m", &m_}, {"adam.v", &v_}};
  }

 private:
  OptimConfig cfg_;
  Tensor m_, v_;
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& cfg, int64_t num_parameters) {
  if (cfg.name == "adam") return std::make_unique<Adam>(cfg, num_parameters);
  if (cfg.name == "sgd") return std::make_unique<NesterovSgd>(cfg, num_parameters);
  DS2_FAIL("key 'optim.name': unknown optimizer '" << cfg.name << "'");
}

double grad_norm(const Tensor& grads) {
  double sum = 0.0;
  const float* g = grads.data();
  for (int64_t i = 0; i < grads.numel(); ++i) sum += static_cast<double>(g[i]) * g[i];
  return std::sqrt(sum);
}

double clip_grad_norm(Tensor& grads, double max_norm) {
  return unscale_and_clip(grads, 1.0f, max_norm);
}

float unscale_clip_factor(double scaled_norm, float loss_scale, double max_norm, double* norm) {
  // Dividing by a power of two is exact in double: the sum of squares scaled by loss_scale^2
  // and its correctly rounded square root scaled by loss_scale.
  *norm = scaled_norm / loss_scale;
  if (!std::isfinite(*norm)) return 1.0f;
  // Rounded to float before unscaling, as clipping without a scale rounds it, so that the
  // product below (exact for a power of two) leaves the same float.
  const float clip = max_norm > 0 && *norm > max_norm ? static_cast<float>(max_norm / *norm) : 1.0f;
  return clip * (1.0f / loss_scale);
}

double unscale_and_clip(Tensor& grads, float loss_scale, double max_norm) {
  double norm = 0;
  const float factor = unscale_clip_factor(grad_norm(grads), loss_scale, max_norm, &norm);
  if (factor != 1.0f) {
    float* g = grads.data();
    for (int64_t i = 0; i < grads.numel(); ++i) g[i] *= factor;
  }
  return norm;
}

double learning_rate(const OptimConfig& cfg, int64_t step, int64_t total_steps,
                     int64_t steps_per_epoch) {
  if (cfg.warmup_steps > 0 && step < cfg.warmup_steps)
    return cfg.lr * static_cast<double>(step + 1) / cfg.warmup_steps;
  if (cfg.schedule == "cosine") {
    const double span = std::max<int64_t>(1, total_steps - cfg.warmup_steps);
    const double progress = std::min(1.0, (step - cfg.warmup_steps) / span);
    const double floor = cfg.lr * cfg.final_lr_ratio;
    return floor + (cfg.lr - floor) * 0.5 * (1.0 + std::cos(M_PI * progress));
  }
  if (cfg.schedule == "exponential") {
    const double epochs = static_cast<double>(step) / std::max<int64_t>(1, steps_per_epoch);
    return cfg.lr * std::pow(cfg.decay_per_epoch, std::floor(epochs));
  }
  return cfg.lr;
}

}  // namespace ds2
