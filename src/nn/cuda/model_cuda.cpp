#include "nn/cuda/model_cuda.h"

#include "core/cuda/check.h"
#include "nn/activations.h"
#include "nn/batch_norm.h"
#include "nn/conv2d.h"
#include "nn/cuda/activations_cuda.h"
#include "nn/cuda/batch_norm_cuda.h"
#include "nn/cuda/conv2d_cuda.h"
#include "nn/cuda/dropout_cuda.h"
#include "nn/cuda/linear_cuda.h"
#include "nn/cuda/lookahead_cuda.h"
#include "nn/cuda/rnn_layer_cuda.h"
#include "nn/cuda/rnn_stack_layer.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/lookahead.h"
#include "nn/rnn_layer.h"

namespace ds2 {

struct CudaModel::Timing {
  // Per layer: a pair of events per forward and per backward, and the accumulated milliseconds.
  std::vector<cudaEvent_t> begin, end;
  std::vector<double> ms;
  std::vector<bool> pending;
};

CudaModel::CudaModel(CudaContext& ctx, Model& host)
    : ctx_(ctx), host_(host), params_(ctx, host.parameters()) {
  const auto& host_layers = host.layers();
  for (size_t i = 0; i < host_layers.size(); ++i) {
    const Layer* layer = host_layers[i].get();
    // Two or more unidirectional clipped-ReLU layers in a row become one stack (a wavefront
    // where the GPU can run one); the indices it covers after its first hold no layer.
    std::vector<const RnnLayer*> run;
    for (size_t j = i; j < host_layers.size(); ++j) {
      const auto* rnn = dynamic_cast<const RnnLayer*>(host_layers[j].get());
      if (!rnn || !CudaRnnStackLayer::can_stack(*rnn) ||
          (!run.empty() && !CudaRnnStackLayer::can_follow(*run.back(), *rnn)))
        break;
      run.push_back(rnn);
    }
    if (run.size() >= 2) {
      auto stack = std::make_unique<CudaRnnStackLayer>(ctx, params_, run);
      stack->set_needs_input_grad(layer->needs_input_grad());
      for (int k = 0; k < stack->size(); ++k) rnn_layers_.push_back(&stack->layer(k));
      stacks_.push_back(stack.get());
      layers_.push_back(std::move(stack));
      kinds_.push_back("RNN");
      spans_.push_back(static_cast<int>(run.size()));
      for (size_t k = 1; k < run.size(); ++k) {
        layers_.push_back(nullptr);
        kinds_.push_back("RNN");
        spans_.push_back(0);
      }
      i += run.size() - 1;
      continue;
    }
    std::unique_ptr<CudaLayer> gpu;
    std::string kind;
    if (auto* conv = dynamic_cast<const Conv2d*>(layer)) {
      gpu = std::make_unique<CudaConv2d>(ctx, params_, *conv);
      kind = "Conv2d";
    } else if (auto* bn = dynamic_cast<const BatchNorm*>(layer)) {
      gpu = std::make_unique<CudaBatchNorm>(ctx, params_, *bn);
      kind = "BatchNorm";
    } else if (auto* relu = dynamic_cast<const ClippedReLU*>(layer)) {
      gpu = std::make_unique<CudaClippedReLU>(ctx, *relu);
      kind = "ClippedReLU";
    } else if (auto* rnn = dynamic_cast<const RnnLayer*>(layer)) {
      auto gpu_rnn = std::make_unique<CudaRnnLayer>(ctx, params_, *rnn);
      rnn_layers_.push_back(gpu_rnn.get());
      gpu = std::move(gpu_rnn);
      kind = "RNN";
    } else if (auto* drop = dynamic_cast<const Dropout*>(layer)) {
      gpu = std::make_unique<CudaDropout>(ctx, *drop);
      kind = "Dropout";
    } else if (auto* row = dynamic_cast<const Lookahead*>(layer)) {
      gpu = std::make_unique<CudaLookahead>(ctx, params_, *row);
      kind = "Lookahead";
    } else if (auto* fc = dynamic_cast<const Linear*>(layer)) {
      gpu = std::make_unique<CudaLinear>(ctx, params_, *fc);
      kind = "Linear";
    } else {
      DS2_FAIL("layer " << layer->name() << " (" << layer->describe()
                        << ") has no CUDA implementation");
    }
    gpu->set_needs_input_grad(layer->needs_input_grad());
    layers_.push_back(std::move(gpu));
    kinds_.push_back(kind);
    spans_.push_back(1);
  }
  activations_.resize(layers_.size());
  layer_bytes_.assign(layers_.size(), 0);
}

CudaModel::~CudaModel() {
  set_timing(false);
}

void CudaModel::reseed_dropout(uint64_t seed) {
  // A layer's masks use seeds base, base + 1, ... (one per training forward): bases drawn at
  // random keep the layers' seed ranges from overlapping.
  Rng rng(seed);
  for (auto& layer : layers_)
    if (auto* drop = dynamic_cast<CudaDropout*>(layer.get()))
      drop->reseed(static_cast<uint64_t>(rng.uniform_int(0, INT64_MAX)));
}

std::map<std::string, uint64_t> CudaModel::dropout_seeds() const {
  std::map<std::string, uint64_t> seeds;
  for (const auto& layer : layers_)
    if (auto* drop = dynamic_cast<const CudaDropout*>(layer.get()))
      seeds[drop->name()] = drop->next_seed();
  return seeds;
}

void CudaModel::set_dropout_seeds(const std::map<std::string, uint64_t>& seeds) {
  for (auto& layer : layers_)
    if (auto* drop = dynamic_cast<CudaDropout*>(layer.get())) {
      const auto it = seeds.find(drop->name());
      DS2_CHECK(it != seeds.end(), "no dropout seed for layer " << drop->name());
      drop->reseed(it->second);  // seeds run base, base + 1, ...: continuing from the next one
    }
}

void CudaModel::forward(const DeviceSequences& features, bool training) {
  check_sequences(features, "model input");
  DS2_CHECK(features.data.rank() == 3 && features.data.dim(2) == host_.input_features(),
            "model input: expected {T, B, " << host_.input_features() << "} features, got "
                                            << shape_str(features.data.shape()));
  input_ = &features;
  const DeviceSequences* in = &features;
  for (size_t i = 0; i < layers_.size(); i += static_cast<size_t>(spans_[i])) {
    const size_t last = i + static_cast<size_t>(spans_[i]) - 1;  // a stack writes its last's
    time_begin(i);
    layers_[i]->forward(*in, activations_[last], training);
    time_end(i);
    in = &activations_[last];
  }
}

void CudaModel::backward(const DeviceSequences& grad_logits, BackwardListener* listener) {
  DS2_CHECK(input_ != nullptr, "model backward before forward");
  DS2_CHECK(grad_logits.data.shape() == logits().data.shape(),
            "model backward: gradient shape " << shape_str(grad_logits.data.shape())
                                              << " differs from the logits' "
                                              << shape_str(logits().data.shape()));
  const DeviceSequences* grad_out = &grad_logits;
  DeviceSequences* grad_in = &grad_a_;
  // Layers may queue their weight-gradient GEMMs beside the layers below them (CudaContext), but
  // not while timing per layer: a layer's time then includes its weight gradients.
  struct Deferral {
    CudaContext& ctx;
    ~Deferral() { ctx.set_defer_weight_gradients(false); }
  } deferral{ctx_};
  ctx_.set_defer_weight_gradients(!timing_);
  for (size_t last = layers_.size(); last-- > 0;) {
    size_t i = last;
    while (spans_[i] == 0) --i;  // the first layer of the stack that ends at `last`
    const DeviceSequences& in = i == 0 ? *input_ : activations_[i - 1];
    time_begin(i);
    layers_[i]->backward(in, activations_[last], *grad_out, *grad_in);
    time_end(i);
    if (listener)
      for (size_t k = last + 1; k-- > i;) listener->gradients_ready(k);
    last = i;
    grad_out = grad_in;
    grad_in = grad_in == &grad_a_ ? &grad_b_ : &grad_a_;
  }
  ctx_.join_weight_gradients();
}

std::string CudaModel::describe_recurrences() const {
  const auto line = [](const CudaRnnLayer& rnn) {
    return rnn.name() + ": " +
           (rnn.recurrence_path().empty() ? "GEMM recurrence" : rnn.recurrence_path()) + "\n";
  };
  std::string out;
  for (const auto& layer : layers_) {
    if (const auto* rnn = dynamic_cast<const CudaRnnLayer*>(layer.get())) out += line(*rnn);
    if (const auto* stack = dynamic_cast<const CudaRnnStackLayer*>(layer.get())) {
      out += stack->name() + ": " + stack->path() + "\n";
      if (!stack->ran_wavefront())
        for (int k = 0; k < stack->size(); ++k) out += "  " + line(stack->layer(k));
    }
  }
  return out;
}

void CudaModel::set_use_wavefront(bool on) {
  for (CudaRnnStackLayer* stack : stacks_) stack->set_use_wavefront(on);
}

void CudaModel::set_use_persistent(bool on) {
  for (CudaRnnLayer* rnn : rnn_layers_) rnn->set_use_persistent(on);
}

void CudaModel::set_recurrent_masks(const std::map<int64_t, const uint8_t*>& by_offset) {
  for (CudaRnnLayer* rnn : rnn_layers_) {
    const uint8_t* masks[2] = {nullptr, nullptr};
    for (int d = 0; d < rnn->directions(); ++d) {
      auto it = by_offset.find(params_.offset(rnn->u(d)));
      if (it != by_offset.end()) masks[d] = it->second;
    }
    rnn->set_recurrent_masks(masks[0], masks[1]);
  }
}

void CudaModel::set_timing(bool on) {
  if (timing_) {
    for (auto e : timing_->begin) cudaEventDestroy(e);
    for (auto e : timing_->end) cudaEventDestroy(e);
    timing_.reset();
  }
  if (!on) return;
  timing_ = std::make_unique<Timing>();
  const size_t n = layers_.size();
  timing_->begin.resize(n);
  timing_->end.resize(n);
  timing_->ms.assign(n, 0.0);
  timing_->pending.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    DS2_CUDA_CHECK(cudaEventCreate(&timing_->begin[i]));
    DS2_CUDA_CHECK(cudaEventCreate(&timing_->end[i]));
  }
}

// Each layer's events are reused: before recording again, collect the previous interval.
void CudaModel::time_begin(size_t layer) {
  bytes_before_ = device_bytes_in_use();
  if (!timing_) return;
  if (timing_->pending[layer]) {
    float ms = 0;
    DS2_CUDA_CHECK(cudaEventSynchronize(timing_->end[layer]));
    DS2_CUDA_CHECK(cudaEventElapsedTime(&ms, timing_->begin[layer], timing_->end[layer]));
    timing_->ms[layer] += ms;
    timing_->pending[layer] = false;
  }
  DS2_CUDA_CHECK(cudaEventRecord(timing_->begin[layer], ctx_.stream()));
}

void CudaModel::time_end(size_t layer) {
  layer_bytes_[layer] += device_bytes_in_use() - bytes_before_;
  if (!timing_) return;
  DS2_CUDA_CHECK(cudaEventRecord(timing_->end[layer], ctx_.stream()));
  timing_->pending[layer] = true;
}

std::vector<double> CudaModel::per_layer_ms() {
  if (!timing_) return std::vector<double>(layers_.size(), 0.0);
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (!timing_->pending[i]) continue;
    float ms = 0;
    DS2_CUDA_CHECK(cudaEventSynchronize(timing_->end[i]));
    DS2_CUDA_CHECK(cudaEventElapsedTime(&ms, timing_->begin[i], timing_->end[i]));
    timing_->ms[i] += ms;
    timing_->pending[i] = false;
  }
  return timing_->ms;
}

std::map<std::string, double> CudaModel::layer_times() {
  std::map<std::string, double> by_kind;
  if (!timing_) return by_kind;
  const std::vector<double> ms = per_layer_ms();
  for (size_t i = 0; i < layers_.size(); ++i) by_kind[kinds_[i]] += ms[i];
  return by_kind;
}

}  // namespace ds2
