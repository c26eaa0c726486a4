#include "train/step_engine.h"

#include <algorithm>
#include <stdexcept>

#include "core/error.h"
#include "nn/dropout.h"

namespace ds2 {

const NamedTensor& flat_state(const Checkpoint& ck, const std::string& name, int64_t numel) {
  const NamedTensor* t = ck.find(name);
  DS2_CHECK(t, ck.path << ": no tensor '" << name
                       << "' (a checkpoint from before exact resume, or of another optimizer or "
                          "weight-averaging setting)");
  DS2_CHECK(static_cast<int64_t>(t->data.size()) == numel,
            ck.path << ": tensor '" << name << "' has " << t->data.size()
                    << " values, the run needs " << numel);
  return *t;
}

namespace {
std::string dropout_key(const std::string& layer) {
  return "train.dropout." + layer;
}
}  // namespace

void set_checkpoint_dropout_seed(Checkpoint* ck, const std::string& layer, uint64_t seed) {
  ck->metadata[dropout_key(layer)] = std::to_string(seed);
}

uint64_t checkpoint_dropout_seed(const Checkpoint& ck, const std::string& layer) {
  const std::string key = dropout_key(layer);
  try {
    return dropout_seed_from_state(ck.meta(key));
  } catch (const std::invalid_argument&) {
    DS2_FAIL(ck.path << ": metadata '" << key << "' is not a valid state");
  }
}

NamedTensor make_flat_state(const std::string& name, const float* data, int64_t numel) {
  return NamedTensor{name, Shape{numel}, std::vector<float>(data, data + numel)};
}

void average_over_ranks(dist::World& world, float* values, int64_t count) {
  if (!world.distributed() || count == 0) return;
  world.allreduce_sum(values, count, "batch-norm statistics average");
  const float inv = 1.0f / static_cast<float>(world.size());
  for (int64_t i = 0; i < count; ++i) values[i] *= inv;
}

uint64_t hash_bytes(const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}

dist::BucketPlan gradient_buckets(const Model& model, const DistConfig& cfg) {
  const auto elements = static_cast<int64_t>(cfg.bucket_mb * 1048576.0 / sizeof(float));
  return dist::BucketPlan(model.layer_parameter_counts(), std::max<int64_t>(1, elements));
}

Batch synthetic_batch(int batch, int frames, int features, int label_length, int num_classes,
                      uint64_t seed) {
  Batch b;
  Rng rng(seed);
  b.features.data.resize({frames, batch, features});
  for (int64_t i = 0; i < b.features.data.numel(); ++i) b.features.data[i] = rng.normal(0, 1);
  b.features.lengths.assign(batch, frames);
  for (int i = 0; i < batch; ++i) {
    std::vector<int> label(label_length);
    // Cycling through the non-blank classes never repeats a label back to back.
    for (int k = 0; k < label_length; ++k) label[k] = 1 + (i + k) % std::max(1, num_classes - 1);
    b.labels.push_back(std::move(label));
    b.examples.push_back(i);
  }
  return b;
}

}  // namespace ds2
