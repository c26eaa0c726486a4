#include "train/loss_scaler.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "core/error.h"

namespace ds2 {

void LossScaler::save(Checkpoint* ck) const {
  if (!dynamic_) return;
  char text[400];
  std::snprintf(text, sizeof text, "%.0f", scale_);  // exact: S is an integer
  ck->metadata["train.loss_scale"] = text;
  ck->metadata["train.loss_scale_clean_steps"] = std::to_string(clean_);
}

void LossScaler::restore(const Checkpoint& ck) {
  const auto scale = ck.metadata.find("train.loss_scale");
  if (!dynamic_ || scale == ck.metadata.end()) return;
  int exponent = 0;
  double s = 0;
  try {
    s = std::stod(scale->second);
    clean_ = std::stoll(ck.meta("train.loss_scale_clean_steps"));
  } catch (const std::logic_error&) {
    s = 0;
  }
  DS2_CHECK(s >= 1 && std::frexp(s, &exponent) == 0.5 && exponent <= 128 && clean_ >= 0,
            ck.path << ": metadata 'train.loss_scale' (" << scale->second
                    << ") or 'train.loss_scale_clean_steps' is not a valid loss scale state");
  scale_ = s;
}

std::string scale_text(double scale) {
  if (scale <= LossScaler::kMaxGrowth) return std::to_string(static_cast<int64_t>(scale));
  int exponent = 0;
  std::frexp(scale, &exponent);
  return "2^" + std::to_string(exponent - 1);
}

}  // namespace ds2
