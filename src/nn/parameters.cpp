#include "nn/parameters.h"

#include <cmath>

#include "core/error.h"

namespace ds2 {

Init Init::uniform_fan_in(int64_t fan_in) {
  return Init::uniform(1.0f / std::sqrt(static_cast<float>(fan_in > 0 ? fan_in : 1)));
}

namespace {
ParamEntry make_entry(const std::string& name, const Shape& shape, Init init, bool trainable,
                      int64_t offset) {
  ParamEntry e;
  e.name = name;
  e.shape = shape;
  e.numel = shape_numel(shape);
  e.offset = offset;
  e.init = init;
  e.trainable = trainable;
  return e;
}

void apply_init(const ParamEntry& e, float* p, Rng& rng) {
  for (int64_t i = 0; i < e.numel; ++i) {
    switch (e.init.kind) {
      case Init::Kind::kConstant:
        p[i] = e.init.a;
        break;
      case Init::Kind::kUniform:
        p[i] = rng.uniform(-e.init.a, e.init.a);
        break;
      case Init::Kind::kNormal:
        p[i] = rng.normal(0.0f, e.init.a);
        break;
    }
  }
}
}  // namespace

ParamRef ParameterStore::add(const std::string& name, const Shape& shape, Init init) {
  DS2_CHECK(!finalized_, "parameter '" << name << "' added after the store was finalized");
  const int64_t offset = params_.empty() ? 0 : params_.back().offset + params_.back().numel;
  params_.push_back(make_entry(name, shape, init, true, offset));
  return {static_cast<int>(params_.size()) - 1, true};
}

ParamRef ParameterStore::add_buffer(const std::string& name, const Shape& shape, Init init) {
  DS2_CHECK(!finalized_, "buffer '" << name << "' added after the store was finalized");
  const int64_t offset =
      buffer_entries_.empty() ? 0 : buffer_entries_.back().offset + buffer_entries_.back().numel;
  buffer_entries_.push_back(make_entry(name, shape, init, false, offset));
  return {static_cast<int>(buffer_entries_.size()) - 1, false};
}

void ParameterStore::finalize() {
  DS2_CHECK(!finalized_, "parameter store finalized twice");
  int64_t n = params_.empty() ? 0 : params_.back().offset + params_.back().numel;
  int64_t nb =
      buffer_entries_.empty() ? 0 : buffer_entries_.back().offset + buffer_entries_.back().numel;
  values_ = Tensor({n});
  grads_ = Tensor({n});
  buffers_ = Tensor({nb});
  finalized_ = true;
}

void ParameterStore::initialize(Rng& rng) {
  DS2_CHECK(finalized_, "parameter store initialized before finalize()");
  for (const auto& e : params_) apply_init(e, values_.data() + e.offset, rng);
  for (const auto& e : buffer_entries_) apply_init(e, buffers_.data() + e.offset, rng);
}

void ParameterStore::zero_grads() {
  grads_.fill(0.0f);
}

const ParamEntry& ParameterStore::entry(ParamRef ref) const {
  return ref.trainable ? params_.at(ref.index) : buffer_entries_.at(ref.index);
}

float* ParameterStore::value(ParamRef ref) {
  DS2_CHECK(finalized_, "parameter accessed before finalize()");
  const ParamEntry& e = entry(ref);
  return (ref.trainable ? values_.data() : buffers_.data()) + e.offset;
}

const float* ParameterStore::value(ParamRef ref) const {
  DS2_CHECK(finalized_, "parameter accessed before finalize()");
  const ParamEntry& e = entry(ref);
  return (ref.trainable ? values_.data() : buffers_.data()) + e.offset;
}

float* ParameterStore::grad(ParamRef ref) {
  DS2_CHECK(finalized_ && ref.trainable, "gradient requested for a non-trainable buffer");
  return grads_.data() + params_.at(ref.index).offset;
}

}  // namespace ds2
