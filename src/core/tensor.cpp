#include "core/tensor.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace ds2 {

Shape::Shape(std::initializer_list<int64_t> dims) {
  for (int64_t d : dims) push_back(d);
}

Shape::Shape(const std::vector<int64_t>& dims) {
  for (int64_t d : dims) push_back(d);
}

int64_t Shape::at(size_t i) const {
  DS2_CHECK(i < size(), "dimension " << i << " of a rank-" << rank_ << " shape");
  return dims_[i];
}

void Shape::push_back(int64_t d) {
  DS2_CHECK(rank_ < kMaxRank, "shapes have at most " << kMaxRank << " dimensions");
  dims_[rank_++] = d;
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] != o.dims_[i]) return false;
  return true;
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    DS2_CHECK(d >= 0, "negative dimension in shape " << shape_str(shape));
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

Tensor::Tensor(const Shape& shape, float fill) {
  resize(shape);
  this->fill(fill);
}

void Tensor::resize(const Shape& shape) {
  const int64_t n = shape_numel(shape);
  reserve(n);
  shape_ = shape;
  numel_ = n;
}

void Tensor::reserve(int64_t numel) {
  if (numel > capacity()) storage_.resize(static_cast<size_t>(numel));
}

void Tensor::fill(float value) {
  std::fill(storage_.begin(), storage_.begin() + numel_, value);
}

}  // namespace ds2
