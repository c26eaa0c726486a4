// Tensor: a contiguous, row-major float32 array with a shape, on the CPU.
//
//   ds2::Tensor x({T, B, F});          // zero-filled
//   x.resize({T2, B, F});              // reuses storage when it fits (no allocation)
//   float* row = x.data() + (t * B + b) * F;
//
// Storage only grows: after the first step at the largest shape, resize() never allocates,
// which is how the training loop stays allocation-free.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace ds2 {

// A tensor shape with inline storage (rank <= kMaxRank), so building one, as every layer does
// each step, never allocates.
class Shape {
 public:
  static constexpr int kMaxRank = 8;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);
  template <typename It>
  Shape(It first, It last) {
    for (; first != last; ++first) push_back(*first);
  }

  size_t size() const { return static_cast<size_t>(rank_); }
  bool empty() const { return rank_ == 0; }
  int64_t& operator[](size_t i) { return dims_[i]; }
  int64_t operator[](size_t i) const { return dims_[i]; }
  int64_t at(size_t i) const;
  const int64_t* begin() const { return dims_; }
  const int64_t* end() const { return dims_ + rank_; }
  int64_t* begin() { return dims_; }
  int64_t* end() { return dims_ + rank_; }
  int64_t back() const { return dims_[rank_ - 1]; }
  void push_back(int64_t d);
  std::vector<int64_t> to_vector() const { return {begin(), end()}; }
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }

 private:
  int64_t dims_[kMaxRank] = {};
  int rank_ = 0;
};

int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(const Shape& shape, float fill = 0.0f);

  // Changes the shape; contents are unspecified afterwards. Allocates only when growing.
  void resize(const Shape& shape);
  // Ensures capacity for `numel` elements without changing the shape.
  void reserve(int64_t numel);
  void fill(float value);

  float* data() { return storage_.data(); }
  const float* data() const { return storage_.data(); }
  int64_t numel() const { return numel_; }
  int64_t capacity() const { return static_cast<int64_t>(storage_.size()); }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_.at(i < 0 ? shape_.size() + i : i); }
  float& operator[](int64_t i) { return storage_[i]; }
  float operator[](int64_t i) const { return storage_[i]; }

 private:
  std::vector<float> storage_;
  Shape shape_;
  int64_t numel_ = 0;
};

}  // namespace ds2
