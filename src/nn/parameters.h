// ParameterStore: every trainable parameter of a model lives in one flat float buffer (and its
// gradient in a second one of the same layout), so optimizers and the gradient allreduce work on
// contiguous memory. Layers register their tensors by name at construction and keep the handle.
// Non-trainable state (batch-norm running statistics) lives in a separate flat buffer of
// "buffers" that is saved with checkpoints but never touched by the optimizer.
//
//   ParameterStore store;
//   ParamRef w = store.add("rnn0.W", {hidden, input}, Init::uniform_fan_in(input));
//   ParamRef mean = store.add_buffer("bn0.running_mean", {hidden}, Init::constant(0));
//   store.finalize();            // allocates; no add() after this
//   store.initialize(rng);       // applies each tensor's Init
//   float* W = store.value(w);   float* dW = store.grad(w);
#pragma once

#include <string>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"

namespace ds2 {

struct Init {
  enum class Kind { kConstant, kUniform, kNormal };
  Kind kind = Kind::kConstant;
  float a = 0.0f;  // constant value, uniform half-width, or normal stddev
  static Init constant(float v) { return {Kind::kConstant, v}; }
  static Init uniform(float half_width) { return {Kind::kUniform, half_width}; }
  static Init normal(float stddev) { return {Kind::kNormal, stddev}; }
  // U(-1/sqrt(fan_in), 1/sqrt(fan_in)), the PyTorch default for linear and recurrent weights.
  static Init uniform_fan_in(int64_t fan_in);
};

struct ParamRef {
  int index = -1;
  bool trainable = true;
};

struct ParamEntry {
  std::string name;
  Shape shape;
  int64_t offset = 0;  // into values()/grads() (trainable) or buffers() (non-trainable)
  int64_t numel = 0;
  Init init;
  bool trainable = true;
};

class ParameterStore {
 public:
  ParamRef add(const std::string& name, const Shape& shape, Init init);
  ParamRef add_buffer(const std::string& name, const Shape& shape, Init init);
  void finalize();
  void initialize(Rng& rng);
  void zero_grads();

  float* value(ParamRef ref);
  const float* value(ParamRef ref) const;
  float* grad(ParamRef ref);
  const ParamEntry& entry(ParamRef ref) const;

  Tensor& values() { return values_; }
  const Tensor& values() const { return values_; }
  Tensor& grads() { return grads_; }
  const Tensor& grads() const { return grads_; }
  Tensor& buffers() { return buffers_; }
  const Tensor& buffers() const { return buffers_; }
  const std::vector<ParamEntry>& parameters() const { return params_; }
  const std::vector<ParamEntry>& buffer_entries() const { return buffer_entries_; }
  int64_t num_parameters() const { return values_.numel(); }
  bool finalized() const { return finalized_; }

 private:
  std::vector<ParamEntry> params_;
  std::vector<ParamEntry> buffer_entries_;
  Tensor values_, grads_, buffers_;
  bool finalized_ = false;
};

}  // namespace ds2
