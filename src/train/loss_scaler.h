// Dynamic loss scaling (train.loss_scaling=dynamic) for the trainer: the scale S multiplies
// dL/dlogits so that small gradients keep their precision; the engines unscale after the
// allreduce. Every rank sees the same reduced norm, so every rank takes the same decisions.
//
//   ds2::LossScaler scaler(cfg.train);
//   norm = engine->backward(1.0f / n, static_cast<float>(scaler.scale()), clip);
//   if (!std::isfinite(norm) && scaler.overflow()) { /* skip the step: S halved */ }
//   else if (scaler.clean_step()) { /* S doubled */ }
//   scaler.save(&checkpoint);  ...  scaler.restore(checkpoint);
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "train/checkpoint.h"
#include "train/config.h"

namespace ds2 {

class LossScaler {
 public:
  // Growth stops here: ample headroom for small gradients in the formats ds2 reduces in (fp32,
  // bf16), and a scale that keeps walking up only walks into the next overflow.
  static constexpr double kMaxGrowth = 16777216.0;  // 2^24

  explicit LossScaler(const TrainLoopConfig& cfg)
      : dynamic_(cfg.loss_scaling == "dynamic"),
        interval_(cfg.loss_scale_growth_interval),
        scale_(dynamic_ ? cfg.loss_scale_init : 1.0) {}

  bool dynamic() const { return dynamic_; }
  double scale() const { return scale_; }
  // A step with finite losses and non-finite gradients: an overflow of the scaled gradients
  // while S > 1 (S halves; returns true), else a plain non-finite step (returns false).
  bool overflow() {
    clean_ = 0;
    if (!dynamic_ || scale_ <= 1) return false;
    scale_ = std::max(1.0, scale_ / 2);
    return true;
  }
  // Any other skipped step breaks a run of clean steps.
  void skipped() { clean_ = 0; }
  // After an optimizer step; returns true when S doubled.
  bool clean_step() {
    if (!dynamic_ || ++clean_ < interval_) return false;
    clean_ = 0;
    if (scale_ >= kMaxGrowth) return false;
    scale_ = std::min(kMaxGrowth, scale_ * 2);
    return true;
  }
  // S and its clean-step count into checkpoint metadata (nothing when not dynamic).
  void save(Checkpoint* ck) const;
  // Continues a dynamic run's scale; a checkpoint without one (another setting, or older) leaves
  // the configured start. Throws naming the checkpoint on an invalid state.
  void restore(const Checkpoint& ck);

 private:
  bool dynamic_;
  int64_t interval_;
  double scale_;
  int64_t clean_ = 0;
};

// "65536" up to the growth limit, "2^120" beyond (for log lines).
std::string scale_text(double scale);

}  // namespace ds2
