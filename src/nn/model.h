// The DS2 acoustic model built from a ModelConfig: convolutional front-end (each Conv2d followed
// by batch norm and clipped ReLU) -> recurrent layers -> per-frame linear layer to class logits.
//
//   ds2::Model model(config, /*input_features=*/81, /*num_classes=*/29);
//   ds2::Rng rng(seed);
//   model.initialize(rng);                   // or load a checkpoint into model.parameters()
//   model.forward(features, /*training=*/true);   // features {T, B, 81}
//   const ds2::Sequences& logits = model.logits(); // {T', B, 29}, T' = output_length(T)
//   model.parameters().zero_grads();
//   model.backward(grad_logits);             // accumulates into model.parameters().grads()
//
// The model owns its ParameterStore (finalized by the constructor; values stay zero until
// initialize() or a checkpoint fills them, so a restore never draws random numbers) and every
// activation and gradient buffer, which are reused: after the first step at the largest batch
// shape no step allocates. Layer and parameter names are stable, since checkpoints store
// parameters by name: "conv<i>" (".weight"), "conv<i>.bn" (".gamma", ".beta", ".running_mean",
// ".running_var"), "conv<i>.relu", "rnn<i>" (".fwd.W", ".bwd.U", ... see rnn_layer.h), "rnn<i>.bn"
// and "fc" (".weight", ".bias"). Convolutions have no bias: the batch norm after them absorbs it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "nn/backward_listener.h"
#include "nn/layer.h"
#include "nn/model_config.h"
#include "nn/parameters.h"
#include "nn/sequences.h"

namespace ds2 {

class Model {
 public:
  Model(const ModelConfig& config, int input_features, int num_classes);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  ParameterStore& parameters() { return store_; }
  const ParameterStore& parameters() const { return store_; }
  // Draws every parameter from its layer's initializer and resets batch-norm statistics.
  // Also reseeds dropout masks from `rng`.
  void initialize(Rng& rng);

  // features {T, B, input_features} with per-utterance lengths (padding may hold anything
  // finite). `training` selects batch statistics in batch norm and updates the running ones.
  void forward(const Sequences& features, bool training);
  // {T', B, num_classes} of the last forward, lengths[b] = output_length(features.lengths[b]).
  const Sequences& logits() const;
  // dL/d(logits) of the last forward (which must have been a training one); padding ignored.
  // Adds into parameters().grads(); the caller zeroes them between steps. `listener` hears when
  // each layer's gradients are final (a gradient allreduce starts on them).
  void backward(const Sequences& grad_logits, BackwardListener* listener = nullptr);

  // Frames the model emits for an utterance of `input_frames` frames (conv strides shrink time).
  int output_length(int input_frames) const;
  // One line per layer (name, description, frame shape in -> out, parameter count) and a total.
  std::string summary() const;

  const ModelConfig& config() const { return config_; }
  int input_features() const { return input_features_; }
  int num_classes() const { return num_classes_; }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  // Per layer, the trainable values it owns: contiguous slices of parameters().values() in layer
  // order (what gradient buckets are cut from).
  const std::vector<int64_t>& layer_parameter_counts() const { return layer_parameters_; }

  // Wall-clock timing of each layer's forward and backward, for `ds2 bench`: milliseconds per
  // layer kind (layer_kind()), summed since set_timing(true).
  void set_timing(bool on);
  std::map<std::string, double> layer_times() const;
  // The same per layer, in layer order.
  const std::vector<double>& per_layer_ms() const { return layer_ms_; }

 private:
  void add_layer(std::unique_ptr<Layer> layer, const Shape& in_frame_shape);

  ModelConfig config_;
  int input_features_, num_classes_;
  ParameterStore store_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Shape> frame_shapes_;        // per layer: input frame shape
  std::vector<int64_t> layer_parameters_;  // per layer: trainable values it registered

  Sequences input_;                     // copy of the last forward's features
  std::vector<Sequences> activations_;  // activations_[i] = output of layer i
  Sequences grad_a_, grad_b_;           // ping-pong gradient buffers for backward
  bool timing_ = false;
  std::vector<double> layer_ms_;
};

// The kind of a layer for timing reports: "Conv2d", "BatchNorm", "ClippedReLU", "RNN", "Dropout",
// "Linear".
std::string layer_kind(const Layer& layer);

}  // namespace ds2
