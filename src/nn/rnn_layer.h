// Recurrent layer of the acoustic model (DS2 section 3.2), uni- or bidirectional, with the two
// directions summed:
//
//   relu:  h_t = min(max(BN(W x_t) + U h_{t-1} (+ b), 0), relu_clip)
//   gru:   a_t = BN(W x_t) (+ b_x), split into (a_r, a_z, a_n);  g_t = U h_{t-1} + b_h likewise
//          r = sigmoid(a_r + g_r), z = sigmoid(a_z + g_z), n = tanh(a_n + r * g_n)
//          h_t = (1 - z) * n + z * h_{t-1}                       (PyTorch's formulation)
//
// The backward direction starts at each utterance's own last frame. The input projection of all
// timesteps and both directions is one GEMM, the recurrence one GEMM per timestep, and the weight
// gradients dW and dU one GEMM each over all timesteps. The recurrence of each direction and
// each slice of the batch runs at once on the compute threads (core/cpu_threads.h): the two
// directions, or slices of the batch where a direction has more than one thread. With batch norm
// the normalizer's beta is
// the input-side bias, so b (relu) and b_x (gru) exist only without it.
//
//   RnnLayer rnn("rnn0", store, /*input_size=*/672, /*hidden=*/256, RnnType::kRelu,
//                 /*bidirectional=*/true, /*batch_norm=*/true, /*relu_clip=*/20.0f,
//                 /*bn_momentum=*/0.1f);
//   rnn.forward(x, h, true);          // x {T, B, 672} (or {T, B, C, F}), h {T, B, 256}
//   rnn.backward(x, h, dh, dx);
//
// Parameters ("dir" is fwd or bwd): "<name>.dir.W" {G*H, in} (fwd and bwd adjacent in the store,
// so both directions project in one GEMM), "<name>.dir.U" {G*H, H}, "<name>.dir.b" {H} (relu,
// no BN), "<name>.dir.b_x" {3H} (gru, no BN), "<name>.dir.b_h" {3H} (gru), and the batch norm's
// "<name>.bn.*" over all D*G*H projection features. G is 1 (relu) or 3 (gru; gate order r, z, n).
// All weights start U(-1/sqrt(H), 1/sqrt(H)) as in PyTorch: for H = 256 that puts U's spectral
// radius near 0.6, so the clipped-ReLU recurrence starts stable without an identity init.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/batch_norm.h"
#include "nn/layer.h"
#include "nn/parameters.h"

namespace ds2 {

enum class RnnType { kRelu, kGru };

// "rnn" (DS2's clipped-ReLU RNN) or "gru"; anything else throws naming the valid values.
RnnType parse_rnn_type(const std::string& name);
std::string rnn_type_name(RnnType type);

class RnnLayer : public Layer {
 public:
  // `residual` adds the layer's input to its output (y = sum of directions + x, so the input and
  // hidden sizes must match): deep stacks then train stably.
  RnnLayer(const std::string& name, ParameterStore& store, int input_size, int hidden, RnnType type,
           bool bidirectional, bool batch_norm, float relu_clip, float bn_momentum,
           bool residual = false, NormStatistics bn_statistics = NormStatistics::kBatch);

  std::string name() const override { return name_; }
  std::string describe() const override;
  Shape output_frame_shape(const Shape& input_frame_shape) const override;
  void forward(const Sequences& in, Sequences& out, bool training) override;
  void backward(const Sequences& in, const Sequences& out, const Sequences& grad_out,
                Sequences& grad_in) override;

  int hidden() const { return hidden_; }
  int directions() const { return directions_; }
  RnnType type() const { return type_; }
  int input_size() const { return input_size_; }
  bool batch_norm() const { return batch_norm_; }
  float relu_clip() const { return relu_clip_; }
  bool residual() const { return residual_; }
  // Handles into the store for direction d (0 fwd, 1 bwd), for the GPU twin
  // (nn/cuda/rnn_layer_cuda.h). input_bias exists only without batch norm, hidden_bias only for
  // the GRU; bn() is null without batch norm.
  ParamRef w(int d) const { return w_[d]; }
  ParamRef u(int d) const { return u_[d]; }
  ParamRef input_bias(int d) const { return input_bias_[d]; }
  ParamRef hidden_bias(int d) const { return hidden_bias_[d]; }
  const BatchNorm* bn() const { return bn_.get(); }

 private:
  int gates() const { return type_ == RnnType::kGru ? 3 : 1; }
  // Features of the projection for all directions: D * G * H.
  int projection_size() const { return directions_ * gates() * hidden_; }
  // The recurrence is independent across directions and across utterances: it runs as
  // directions x recurrence_slices(B) parts at once, each on rows [b0, b1) of one direction.
  int recurrence_slices(int batch) const;
  void run_direction(int d, const Sequences& in, int b0, int b1);
  void backprop_direction(int d, const Sequences& in, const Sequences& grad_out, int b0, int b1);
  // dU (and the biases' gradients) of direction d from the whole batch's dG.
  void accumulate_weight_grads(int d, int T, int B);

  std::string name_;
  ParameterStore& store_;
  int input_size_, hidden_;
  RnnType type_;
  int directions_;
  bool batch_norm_;
  float relu_clip_;
  bool residual_;
  ParamRef w_[2], u_[2], input_bias_[2], hidden_bias_[2];
  std::unique_ptr<BatchNorm> bn_;

  // Forward state kept for backward (reused across steps).
  Sequences projection_;          // {T, B, D*G*H}: W x
  Sequences preactivation_;       // BN(W x) (+ bias); relu: + U h in place; gru: then gates r, z, n
  Tensor hidden_states_;          // {D, T, B, H}; padding rows are zero (the other direction's h0)
  Tensor hidden_candidate_;       // gru: {D, T, B, H}, U_n h + b_hn (what r multiplied)
  Tensor step_hidden_gates_;      // gru: {D, B, 3H}, U h of one step per direction
  Tensor zero_state_;             // {B, H} zeros: h before the first step
  Tensor u_transposed_;           // {D, H, G*H}: U^T, so each step's product is a plain NN sgemm
  std::vector<int> active_rows_;  // per t: 1 + last batch row valid at t (rows beyond skip GEMMs)

  // Backward scratch.
  Sequences grad_preactivation_;  // {T, B, D*G*H}: dL/d(BN output)
  Sequences grad_projection_;     // {T, B, D*G*H}: dL/d(W x) through the batch norm
  Tensor grad_hidden_gates_;      // gru: {D, T, B, 3H}: dL/d(U h + b_h)
  Tensor carry_a_, carry_b_;      // {D, B, H}: dL/dh from the next processed step (ping-pong)
};

}  // namespace ds2
