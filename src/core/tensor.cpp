#include "core/tensor.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace ds2 {

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
