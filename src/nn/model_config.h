// Architecture settings of the acoustic model (YAML section `model`).
//
//   ds2::ModelConfig mc;                 // DS2-style defaults
//   mc.rnn_layers = 3; mc.rnn_hidden = 256;
//   ds2::Model model(mc, /*input_features=*/81, /*num_classes=*/29);
#pragma once

#include <string>
#include <vector>

namespace ds2 {

struct ConvLayerConfig {
  int channels = 32;
  int kernel_time = 11;
  int kernel_freq = 41;
  int stride_time = 2;
  int stride_freq = 2;
};

struct ModelConfig {
  // Convolutional front-end over time x frequency, each followed by batch norm and clipped ReLU.
  // Padding is kernel/2 on both axes.
  std::vector<ConvLayerConfig> conv = {{32, 11, 41, 2, 2}, {32, 11, 21, 1, 2}};
  int rnn_layers = 3;
  int rnn_hidden = 256;
  std::string rnn_type = "rnn";  // rnn (ReLU, as DS2) | gru
  bool bidirectional = true;     // directions are summed
  bool rnn_batch_norm = true;    // sequence-wise batch norm on the input projection
  bool rnn_residual = false;  // add each recurrent layer's input to its output where widths match
  float relu_clip = 20.0f;    // clipped ReLU ceiling (DS2 uses 20)
  float batch_norm_momentum = 0.1f;  // running statistics update rate
  // Whose statistics every batch norm uses: "batch" (the minibatch's; running averages at
  // inference) or "utterance" (each utterance's own, in training and inference).
  std::string batch_norm_statistics = "batch";
  float dropout = 0.0f;  // dropout after each recurrent layer (0 = none)
  // Future frames of the lookahead (row) convolution after the last recurrent layer (DS2's
  // streaming-friendly context for unidirectional models); 0 = none.
  int lookahead = 0;
};

}  // namespace ds2
