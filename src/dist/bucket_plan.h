// BucketPlan: how the flat gradient buffer is cut into allreduce buckets. Layers own contiguous
// slices in layer order and backward finishes them last layer first, so buckets are runs of whole
// layers taken from the end, each at least `bucket_elements` long (the last one may be shorter); a
// bucket can be reduced as soon as its lowest layer has finished backward.
//
//   BucketPlan plan(model.layer_parameter_counts(), /*bucket_elements=*/4 << 20);
//   for (int b : plan.ready_after(layer)) launch(plan.buckets()[b]);
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ds2::dist {

struct Bucket {
  int64_t offset = 0;  // into the flat gradient buffer
  int64_t count = 0;
  size_t lowest_layer = 0;  // the bucket is final once this layer's backward is done
};

class BucketPlan {
 public:
  BucketPlan(const std::vector<int64_t>& layer_parameters, int64_t bucket_elements);

  // In launch order (the end of the buffer first).
  const std::vector<Bucket>& buckets() const { return buckets_; }
  // The buckets that become final when layer `layer` finishes backward.
  const std::vector<int>& ready_after(size_t layer) const { return ready_after_.at(layer); }
  int64_t total() const { return total_; }
  size_t layers() const { return ready_after_.size(); }
  // "4 buckets: 12.0, 12.0, 9.1, 0.4 MiB", for logs.
  std::string describe() const;

 private:
  std::vector<Bucket> buckets_;
  std::vector<std::vector<int>> ready_after_;
  int64_t total_ = 0;
};

}  // namespace ds2::dist
