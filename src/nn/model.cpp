#include "nn/model.h"

#include <chrono>
#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "nn/activations.h"
#include "nn/batch_norm.h"
#include "nn/conv2d.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/lookahead.h"
#include "nn/rnn_layer.h"

namespace ds2 {

Model::Model(const ModelConfig& config, int input_features, int num_classes)
    : config_(config), input_features_(input_features), num_classes_(num_classes) {
  DS2_CHECK(input_features > 0, "model: input_features must be positive, got " << input_features);
  DS2_CHECK(num_classes > 0, "model: num_classes must be positive, got " << num_classes);
  DS2_CHECK(config.rnn_layers >= 1,
            "model.rnn_layers must be at least 1, got " << config.rnn_layers);
  DS2_CHECK(config.rnn_hidden >= 1, "model.rnn_hidden must be positive, got " << config.rnn_hidden);
  const RnnType rnn_type = parse_rnn_type(config.rnn_type);
  const NormStatistics bn_statistics = parse_norm_statistics(config.batch_norm_statistics);

  Shape frame = {input_features};
  int channels = 1;
  for (size_t i = 0; i < config.conv.size(); ++i) {
    const ConvLayerConfig& c = config.conv[i];
    const std::string name = "conv" + std::to_string(i);
    auto conv = std::make_unique<Conv2d>(name, store_, channels, c.channels, c.kernel_time,
                                         c.kernel_freq, c.stride_time, c.stride_freq,
                                         /*with_bias=*/false);
    const Shape conv_out = conv->output_frame_shape(frame);
    DS2_CHECK(conv_out[1] >= 1, name << ": frequency axis shrank to nothing");
    add_layer(std::move(conv), frame);
    frame = conv_out;
    add_layer(std::make_unique<BatchNorm>(name + ".bn", store_, c.channels,
                                          config.batch_norm_momentum, bn_statistics),
              frame);
    add_layer(std::make_unique<ClippedReLU>(name + ".relu", config.relu_clip), frame);
    channels = c.channels;
  }
  // The RNN reads {T, B, C, F'} frames as C*F' features: no reshape copy needed.
  int features = static_cast<int>(shape_numel(frame));
  for (int i = 0; i < config.rnn_layers; ++i) {
    add_layer(std::make_unique<RnnLayer>(
                  "rnn" + std::to_string(i), store_, features, config.rnn_hidden, rnn_type,
                  config.bidirectional, config.rnn_batch_norm, config.relu_clip,
                  config.batch_norm_momentum,
                  /*residual=*/config.rnn_residual && features == config.rnn_hidden, bn_statistics),
              frame);
    features = config.rnn_hidden;
    frame = {features};
    if (config.dropout > 0.0f)
      add_layer(std::make_unique<Dropout>("rnn" + std::to_string(i) + ".dropout", config.dropout),
                frame);
  }
  if (config.lookahead > 0)
    add_layer(std::make_unique<Lookahead>("lookahead", store_, features, config.lookahead), frame);
  add_layer(std::make_unique<Linear>("fc", store_, features, num_classes), frame);
  layers_.front()->set_needs_input_grad(false);
  store_.finalize();
  activations_.resize(layers_.size());
}

void Model::initialize(Rng& rng) {
  store_.initialize(rng);
  for (auto& layer : layers_)
    if (auto* drop = dynamic_cast<Dropout*>(layer.get()))
      drop->reseed(static_cast<uint64_t>(rng.uniform_int(0, INT64_MAX)));
}

void Model::add_layer(std::unique_ptr<Layer> layer, const Shape& in_frame_shape) {
  // Layers register their parameters in their constructors, so whatever the store gained since
  // the previous layer belongs to this one.
  int64_t registered = 0, attributed = 0;
  for (const ParamEntry& e : store_.parameters()) registered += e.numel;
  for (int64_t n : layer_parameters_) attributed += n;
  layer_parameters_.push_back(registered - attributed);
  frame_shapes_.push_back(in_frame_shape);
  layers_.push_back(std::move(layer));
}

void Model::forward(const Sequences& features, bool training) {
  check_sequences(features, "model input");
  DS2_CHECK(features.data.rank() == 3 && features.data.dim(2) == input_features_,
            "model input: expected {T, B, " << input_features_ << "} features, got "
                                            << shape_str(features.data.shape()));
  input_.data.resize(features.data.shape());
  std::copy(features.data.data(), features.data.data() + features.data.numel(), input_.data.data());
  input_.lengths = features.lengths;
  const Sequences* in = &input_;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const auto start =
        timing_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    layers_[i]->forward(*in, activations_[i], training);
    if (timing_)
      layer_ms_[i] +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
    in = &activations_[i];
  }
}

const Sequences& Model::logits() const {
  return activations_.back();
}

void Model::backward(const Sequences& grad_logits, BackwardListener* listener) {
  DS2_CHECK(grad_logits.data.shape() == logits().data.shape(),
            "model backward: gradient shape " << shape_str(grad_logits.data.shape())
                                              << " differs from the logits' "
                                              << shape_str(logits().data.shape()));
  const Sequences* grad_out = &grad_logits;
  Sequences* grad_in = &grad_a_;
  for (size_t i = layers_.size(); i-- > 0;) {
    const Sequences& in = i == 0 ? input_ : activations_[i - 1];
    const auto start =
        timing_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    layers_[i]->backward(in, activations_[i], *grad_out, *grad_in);
    if (timing_)
      layer_ms_[i] +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
    if (listener) listener->gradients_ready(i);
    grad_out = grad_in;
    grad_in = grad_in == &grad_a_ ? &grad_b_ : &grad_a_;
  }
}

void Model::set_timing(bool on) {
  timing_ = on;
  layer_ms_.assign(layers_.size(), 0.0);
}

std::map<std::string, double> Model::layer_times() const {
  std::map<std::string, double> by_kind;
  for (size_t i = 0; i < layer_ms_.size(); ++i) by_kind[layer_kind(*layers_[i])] += layer_ms_[i];
  return by_kind;
}

std::string layer_kind(const Layer& layer) {
  if (dynamic_cast<const Conv2d*>(&layer)) return "Conv2d";
  if (dynamic_cast<const BatchNorm*>(&layer)) return "BatchNorm";
  if (dynamic_cast<const ClippedReLU*>(&layer)) return "ClippedReLU";
  if (dynamic_cast<const RnnLayer*>(&layer)) return "RNN";
  if (dynamic_cast<const Dropout*>(&layer)) return "Dropout";
  if (dynamic_cast<const Linear*>(&layer)) return "Linear";
  if (dynamic_cast<const Lookahead*>(&layer)) return "Lookahead";
  return layer.name();
}

int Model::output_length(int input_frames) const {
  int length = input_frames;
  for (const auto& layer : layers_) length = layer->output_length(length);
  return length;
}

std::string Model::summary() const {
  std::ostringstream out;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = *layers_[i];
    out << std::left << std::setw(10) << layer.name() << " " << std::setw(48) << layer.describe()
        << " " << shape_str(frame_shapes_[i]) << " -> "
        << shape_str(layer.output_frame_shape(frame_shapes_[i])) << "  params "
        << layer_parameters_[i] << "\n";
  }
  out << "total parameters " << store_.num_parameters() << "\n";
  return out.str();
}

}  // namespace ds2
