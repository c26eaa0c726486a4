#include "train/pruning.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace ds2 {

namespace {
bool is_recurrent(const std::string& name) {
  return name.size() > 2 && name.compare(name.size() - 2, 2, ".U") == 0;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}
}  // namespace

void apply_weight_masks(const std::vector<WeightMask>& masks, float* data) {
  for (const WeightMask& m : masks) {
    float* w = data + m.offset;
    for (int64_t i = 0; i < m.numel; ++i)
      if (!m.mask[i]) w[i] = 0.0f;
  }
}

Pruner::Pruner(const PruneConfig& cfg, const ParameterStore& store) : cfg_(cfg) {
  int64_t largest = 0;
  for (const ParamEntry& e : store.parameters())
    if (e.trainable && is_recurrent(e.name)) {
      storage_.emplace_back(static_cast<size_t>(e.numel), uint8_t{1});
      largest = std::max(largest, e.numel);
    }
  // Pointers into storage_ are taken after it stops growing.
  size_t k = 0;
  for (const ParamEntry& e : store.parameters())
    if (e.trainable && is_recurrent(e.name))
      masks_.push_back({e.name, e.offset, e.numel, storage_[k++].data()});
  order_.resize(static_cast<size_t>(largest));
  count_kept();
}

double Pruner::density_at(const PruneConfig& cfg, int64_t step) {
  if (cfg.density >= 1 || step <= cfg.start_step) return 1.0;
  if (step >= cfg.end_step) return cfg.density;
  const double p = static_cast<double>(step - cfg.start_step) / (cfg.end_step - cfg.start_step);
  const double q = 1.0 - std::clamp(p, 0.0, 1.0);
  return cfg.density + (1.0 - cfg.density) * q * q * q;
}

bool Pruner::due(int64_t step) const {
  if (!enabled() || step < cfg_.start_step || step > cfg_.end_step) return false;
  return step == cfg_.end_step || (step - cfg_.start_step) % cfg_.every == 0;
}

void Pruner::update(int64_t step, const float* values) {
  target_ = density_at(cfg_, step);
  for (size_t k = 0; k < masks_.size(); ++k) {
    const WeightMask& m = masks_[k];
    const float* w = values + m.offset;
    uint8_t* mask = storage_[k].data();
    const int64_t n = m.numel;
    const auto keep = static_cast<int64_t>(std::llround(target_ * static_cast<double>(n)));
    // Largest |w| first, ties to the lower index: a total order, so every rank (holding the same
    // weights) picks the same set without communicating. Weights pruned before are 0 and stay
    // out while enough nonzeros remain, since the density only falls.
    for (int64_t i = 0; i < n; ++i) order_[i] = i;
    auto before = [w](int64_t a, int64_t b) {
      const float x = std::fabs(w[a]), y = std::fabs(w[b]);
      return x > y || (x == y && a < b);
    };
    if (keep < n)
      std::nth_element(order_.begin(), order_.begin() + keep, order_.begin() + n, before);
    std::fill(mask, mask + n, uint8_t{0});
    for (int64_t i = 0; i < keep; ++i) mask[order_[i]] = 1;
  }
  count_kept();
}

void Pruner::count_kept() {
  kept_ = total_ = 0;
  for (const WeightMask& m : masks_) {
    total_ += m.numel;
    for (int64_t i = 0; i < m.numel; ++i) kept_ += m.mask[i];
  }
}

std::string Pruner::describe_update(int64_t step) const {
  return "prune: step " + std::to_string(step) + ", density " + fixed(density(), 4) + " (target " +
         fixed(target_, 4) + "), " + std::to_string(kept()) + " of " + std::to_string(total()) +
         " recurrent weights kept";
}

std::string Pruner::describe_schedule() const {
  if (!enabled()) return "pruning: off";
  return "pruning: on, " + std::to_string(masks_.size()) + " recurrent matrices (" +
         std::to_string(total()) + " weights) from density 1 at step " +
         std::to_string(cfg_.start_step) + " to " + fixed(cfg_.density, 4) + " at step " +
         std::to_string(cfg_.end_step) + " (cubic schedule), masks updated every " +
         std::to_string(cfg_.every) + " steps";
}

void Pruner::save(Checkpoint* ck) const {
  if (!enabled()) return;
  for (const WeightMask& m : masks_) {
    NamedTensor t{"prune.mask." + m.name, {m.numel}, std::vector<float>(m.numel)};
    for (int64_t i = 0; i < m.numel; ++i) t.data[i] = m.mask[i] ? 1.0f : 0.0f;
    ck->tensors.push_back(std::move(t));
  }
  char text[64];
  std::snprintf(text, sizeof text, "%.17g", target_);  // round-trips exactly
  ck->metadata["prune.target"] = text;
}

void Pruner::restore(const Checkpoint& ck) {
  for (size_t k = 0; k < masks_.size(); ++k) {
    const WeightMask& m = masks_[k];
    const NamedTensor* t = ck.find("prune.mask." + m.name);
    if (!t) continue;
    DS2_CHECK(static_cast<int64_t>(t->data.size()) == m.numel,
              ck.path << ": tensor 'prune.mask." << m.name << "' has " << t->data.size()
                      << " values, the model's " << m.name << " has " << m.numel);
    for (int64_t i = 0; i < m.numel; ++i) {
      const float v = t->data[i];
      DS2_CHECK(v == 0.0f || v == 1.0f, ck.path << ": tensor 'prune.mask." << m.name << "' holds "
                                                << v << " at " << i
                                                << "; a mask holds only 0 and 1");
      storage_[k][i] = v == 1.0f ? 1 : 0;
    }
  }
  count_kept();
  const auto target = ck.metadata.find("prune.target");
  if (target != ck.metadata.end()) {
    try {
      target_ = std::stod(target->second);
    } catch (const std::logic_error&) {
      DS2_FAIL(ck.path << ": metadata 'prune.target' (" << target->second << ") is not a number");
    }
  }
}

}  // namespace ds2
