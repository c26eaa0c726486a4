#include "nn/cuda/rnn_stack_layer.h"

#include <algorithm>

#include "core/error.h"

namespace ds2 {

bool CudaRnnStackLayer::can_stack(const RnnLayer& layer) {
  return layer.directions() == 1 && layer.type() == RnnType::kRelu && !layer.batch_norm();
}

bool CudaRnnStackLayer::can_follow(const RnnLayer& prev, const RnnLayer& next) {
  // The stack adds the input around every layer of its own width, or around none.
  const bool same_rule = prev.input_size() != prev.hidden() || prev.residual() == next.residual();
  return can_stack(prev) && can_stack(next) && next.input_size() == prev.hidden() &&
         next.hidden() == prev.hidden() && next.relu_clip() == prev.relu_clip() && same_rule;
}

CudaRnnStackLayer::CudaRnnStackLayer(CudaContext& ctx, DeviceParameters& params,
                                     const std::vector<const RnnLayer*>& layers)
    : ctx_(ctx), host_(layers) {
  DS2_CHECK(layers.size() >= 2, "CudaRnnStackLayer: a stack needs two or more layers");
  for (size_t i = 0; i + 1 < layers.size(); ++i)
    DS2_CHECK(can_follow(*layers[i], *layers[i + 1]),
              layers[i + 1]->name() << " cannot follow " << layers[i]->name() << " in a stack");
  for (const RnnLayer* l : layers) {
    layers_.push_back(std::make_unique<CudaRnnLayer>(ctx, params, *l));
    weights_.push_back(
        {params.value(l->w(0)), params.value(l->u(0)), params.value(l->input_bias(0))});
    grads_.push_back({params.grad(l->w(0)), params.grad(l->u(0)), params.grad(l->input_bias(0))});
  }
  between_.resize(layers.size() - 1);
}

std::string CudaRnnStackLayer::name() const {
  return host_.front()->name() + "-" + host_.back()->name();
}

bool CudaRnnStackLayer::has_masks() const {
  for (const auto& l : layers_)
    if (l->has_recurrent_masks()) return true;
  return false;
}

CudaRnnStackLayer::Path CudaRnnStackLayer::plan_wavefront(int T, int B) {
  if (!use_wavefront_) return Path::kSwitchedOff;
  if (has_masks()) return Path::kPruned;
  if (!stack_failed_.empty()) return Path::kNoStack;
  const RnnLayer& first = *host_.front();
  if (B >= refused_batch_) return Path::kBatch;
  if (B > stack_batch_) {
    // A batch the cluster kernel cannot take (evaluation's, say) must not rebuild the stack into
    // one that never runs the wavefront again: ask the plan first.
    const PersistentRnnPlan plan(first.hidden(), B, 1, ctx_.device(), ctx_.matmul_precision(),
                                 kClusterBeforeGrid);
    if (!plan.fits() || !plan.tiling().cluster) {
      refused_batch_ = B;
      return Path::kBatch;
    }
  }
  if (!stack_ || T > stack_steps_ || B > stack_batch_) {
    // Buffers only grow, as every layer's: a longer or larger batch rebuilds the stack (steps
    // rounded up to 64, so that slowly growing lengths rebuild it rarely).
    const int steps = std::max((T + 63) / 64 * 64, stack_steps_);
    const int batch = std::max(B, stack_batch_);
    const bool residual = host_[1]->residual();
    stack_.reset();
    try {
      stack_ = std::make_unique<CudaRnnStack>(ctx_, size(), first.input_size(), first.hidden(),
                                              batch, steps, ctx_.matmul_precision(), residual,
                                              /*chunk=*/32, first.relu_clip());
    } catch (const Error& e) {
      stack_failed_ = e.what();
      return Path::kNoStack;
    }
    stack_steps_ = steps;
    stack_batch_ = batch;
  }
  return stack_->wavefront_possible() ? Path::kWavefront : Path::kNoCluster;
}

std::string CudaRnnStackLayer::path() const {
  switch (path_) {
    case Path::kNotRun:
      return "not run yet";
    case Path::kWavefront:
      return "wavefront: " + stack_->describe();
    case Path::kSwitchedOff:
      return "layer after layer (the wavefront is switched off)";
    case Path::kPruned:
      return "layer after layer (pruned U: the sparse kernel runs per layer)";
    case Path::kNoStack:
      return "layer after layer (" + stack_failed_ + ")";
    case Path::kBatch:
      return "layer after layer (batch " + std::to_string(last_batch_) +
             " is beyond the cluster kernel's)";
    case Path::kNoCluster:
      return "layer after layer (" + stack_->wavefront_why_not() + ")";
  }
  return "";
}

void CudaRnnStackLayer::forward(const DeviceSequences& in, DeviceSequences& out, bool training) {
  check_sequences(in, name());
  const int T = static_cast<int>(in.time()), B = static_cast<int>(in.batch());
  last_batch_ = B;
  path_ = T * B > 0 ? plan_wavefront(T, B) : Path::kNotRun;
  if (!ran_wavefront()) {
    const DeviceSequences* x = &in;
    for (int i = 0; i < size(); ++i) {
      DeviceSequences& y = i + 1 < size() ? between_[static_cast<size_t>(i)] : out;
      layers_[static_cast<size_t>(i)]->forward(*x, y, training);
      x = &y;
    }
    return;
  }
  out.data.resize({T, B, host_.back()->hidden()});
  out.copy_lengths(in, ctx_.stream());
  stack_->forward(in.data.data(), weights_, in.lengths, in.device_lengths.data(), T, B,
                  /*wavefront=*/true, out.data.data());
}

void CudaRnnStackLayer::backward(const DeviceSequences& in, const DeviceSequences& out,
                                 const DeviceSequences& grad_out, DeviceSequences& grad_in) {
  DS2_CHECK(grad_out.data.shape() == out.data.shape(),
            name() << ": gradient shape " << shape_str(grad_out.data.shape())
                   << " differs from the output's " << shape_str(out.data.shape()));
  const int T = static_cast<int>(in.time()), B = static_cast<int>(in.batch());
  if (!ran_wavefront()) {
    // Layer after layer from the top, the gradient between two layers in one of two buffers.
    const DeviceSequences* g = &grad_out;
    for (int i = size(); i-- > 0;) {
      const DeviceSequences& x = i == 0 ? in : between_[static_cast<size_t>(i - 1)];
      const DeviceSequences& y = i + 1 < size() ? between_[static_cast<size_t>(i)] : out;
      DeviceSequences& dx = i == 0 ? grad_in : (g == &grad_a_ ? grad_b_ : grad_a_);
      CudaRnnLayer& layer = *layers_[static_cast<size_t>(i)];
      layer.set_needs_input_grad(i > 0 || needs_input_grad_);
      layer.backward(x, y, *g, dx);
      g = &dx;
    }
    return;
  }
  // The stack always computes dx (the layers below the first need theirs anyway).
  grad_in.data.resize(in.data.shape());
  grad_in.copy_lengths(in, ctx_.stream());
  stack_->backward(in.data.data(), out.data.data(), weights_, grad_out.data.data(), in.lengths,
                   in.device_lengths.data(), T, B, /*wavefront=*/true, grad_in.data.data(), grads_);
}

}  // namespace ds2
