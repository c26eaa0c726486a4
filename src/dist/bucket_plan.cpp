#include "dist/bucket_plan.h"

#include <cstdio>

#include "core/error.h"

namespace ds2::dist {

BucketPlan::BucketPlan(const std::vector<int64_t>& layer_parameters, int64_t bucket_elements) {
  DS2_CHECK(bucket_elements > 0, "bucket size must be positive, got " << bucket_elements);
  const size_t layers = layer_parameters.size();
  ready_after_.resize(layers);
  std::vector<int64_t> offsets(layers + 1, 0);
  for (size_t i = 0; i < layers; ++i) {
    DS2_CHECK(layer_parameters[i] >= 0, "layer " << i << " has a negative parameter count");
    offsets[i + 1] = offsets[i] + layer_parameters[i];
  }
  total_ = offsets[layers];
  int64_t end = total_;  // the open bucket covers [offsets[i], end)
  for (size_t i = layers; i-- > 0;) {
    const int64_t begin = offsets[i];
    const bool full = end - begin >= bucket_elements;
    if ((full || i == 0) && end > begin) {
      ready_after_[i].push_back(static_cast<int>(buckets_.size()));
      buckets_.push_back({begin, end - begin, i});
      end = begin;
    }
  }
}

std::string BucketPlan::describe() const {
  std::string out =
      std::to_string(buckets_.size()) + (buckets_.size() == 1 ? " bucket:" : " buckets:");
  char buf[32];
  for (size_t b = 0; b < buckets_.size(); ++b) {
    std::snprintf(buf, sizeof buf, "%s %.1f", b ? "," : "", buckets_[b].count * 4.0 / 1048576.0);
    out += buf;
  }
  return out + " MiB (fp32)";
}

}  // namespace ds2::dist
