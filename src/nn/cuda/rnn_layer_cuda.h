// CudaRnnLayer: the GPU twin of RnnLayer (nn/rnn_layer.h), the "GEMM RNN" baseline of the GPU
// backend (structure of Appleyard et al. 2016, the cuDNN 5 RNN paper): the input projection W x of
// all timesteps and both directions is one cuBLAS GEMM (then the batch norm BN(W x), or the input
// biases); each timestep is one GEMM U h_{t-1} over the batch plus one fused elementwise kernel
// (kernels/rnn.h: activation or GRU gates, padding mask); the two directions of a bidirectional
// layer run concurrently, forward on ctx.stream() and backward on ctx.side_stream() with a
// cuBLAS handle of this layer's own. Backward mirrors it: per step a fused derivative kernel and
// one GEMM through U; then dU, dW and dx as single GEMMs over all timesteps.
// Same math, parameter layout and padding rules as the CPU layer (the backward direction starts
// at each utterance's own last frame; directions summed; padding frames give h = 0 and never
// influence anything).
// Clipped-ReLU layers run the recurrence (forward and backward-data) in the persistent kernel
// instead (nn/cuda/persistent_rnn.h) when its plan fits the GPU and batch: both directions in one
// cooperative launch on ctx.stream() when that fits, else one direction after the other; the
// projection and weight-gradient GEMMs are unchanged. With pruning masks on U
// (set_recurrent_masks) the sparse persistent kernel (nn/cuda/sparse_persistent_rnn.h) runs
// instead where prefer_sparse() picks it; its layouts are built and uploaded when the masks are
// set (between steps), not in a step. recurrence_path() says which recurrence runs and why;
// set_use_persistent(false) forces the GEMM recurrence.
//
//   RnnLayer cpu("rnn0", store, 672, 1152, RnnType::kRelu, true, true, 20.0f, 0.1f);
//   store.finalize();  store.initialize(rng);
//   DeviceParameters params(ctx, store);
//   CudaRnnLayer rnn(ctx, params, cpu);
//   rnn.forward(x, h, /*training=*/true);    // x {T, B, 672} (or {T, B, C, F}), h {T, B, 1152}
//   rnn.backward(x, h, dh, dx);
#pragma once

#include <cublas_v2.h>

#include <memory>
#include <string>
#include <vector>

#include "core/cuda/device_array.h"
#include "core/cuda/step_graph.h"
#include "nn/cuda/batch_norm_cuda.h"
#include "nn/cuda/cuda_layer.h"
#include "nn/cuda/gemm_recurrence.h"
#include "nn/cuda/persistent_gru.h"
#include "nn/cuda/persistent_rnn.h"
#include "nn/cuda/sparse_persistent_rnn.h"
#include "nn/rnn_layer.h"

namespace ds2 {

class CudaRnnLayer : public CudaLayer {
 public:
  CudaRnnLayer(CudaContext& ctx, DeviceParameters& params, const RnnLayer& cpu);
  ~CudaRnnLayer() override;
  CudaRnnLayer(const CudaRnnLayer&) = delete;
  CudaRnnLayer& operator=(const CudaRnnLayer&) = delete;

  std::string name() const override { return name_; }
  void forward(const DeviceSequences& in, DeviceSequences& out, bool training) override;
  void backward(const DeviceSequences& in, const DeviceSequences& out,
                const DeviceSequences& grad_out, DeviceSequences& grad_in) override;

  int hidden() const { return hidden_; }
  // "persistent recurrence (plan ...)" or "GEMM recurrence (why)", once a forward has run; empty
  // before.
  const std::string& recurrence_path() const { return recurrence_path_; }
  int directions() const { return directions_; }
  // true (default): the persistent recurrence where it fits; false: always the GEMM recurrence.
  void set_use_persistent(bool on) { use_persistent_ = on; }
  bool use_persistent() const { return use_persistent_; }
  // Whether the last forward or backward ran the persistent kernel.
  bool ran_persistent() const { return ran_persistent_; }
  // U's pruning masks per direction (H x H bytes, 0 = pruned; copied), or nulls when unpruned.
  // The weights themselves must already be masked (the engines keep them so).
  void set_recurrent_masks(const uint8_t* fwd, const uint8_t* bwd);
  bool has_recurrent_masks() const { return !masks_[0].empty() || !masks_[1].empty(); }
  // Whether the last forward or backward ran the sparse persistent kernel.
  bool ran_sparse() const { return ran_persistent_ && sparse_chosen_; }
  const ParamRef& u(int d) const { return u_[d]; }
  // Forward and backward recurrences replayed from a captured CUDA graph so far.
  int64_t graph_replays() const { return forward_graph_.replays() + backward_graph_.replays(); }

 private:
  int gates() const { return type_ == RnnType::kGru ? 3 : 1; }
  int projection_size() const { return directions_ * gates() * hidden_; }
  // Direction d's stream and cuBLAS handle: the main ones for d = 0, the side ones for d = 1.
  cudaStream_t stream(int d) const;
  cublasHandle_t blas(int d) const;
  // Direction d's GEMM recurrence (its stream, U, and U's bf16 copy in bf16 precision).
  GemmRecurrence gemm_recurrence(int d, int B, const int* lengths) const;
  void run_direction(int d, int T, int B, const int* lengths);
  // The GEMM path's per-step backward recurrence of direction d: fills dpre (and dG for GRU).
  void backprop_direction(int d, int T, int B, const int* lengths, const float* dy);
  // dU and the recurrence-side bias gradients of direction d, from dpre, on stream s / handle.
  void accumulate_recurrent_gradients(int d, int T, int B, bool bf16, cudaStream_t s,
                                      cublasHandle_t handle);
  // Plans the recurrence for batch B (dense or sparse persistent, workspace reserved); false when
  // that pass (forward, or backward-data: `backward`) runs the GEMM recurrence (disabled, or no
  // persistent plan fits; a bf16 GRU layer may run its forward persistent and its backward-data
  // on the GEMM recurrence).
  bool plan_persistent(int B, bool backward);
  // plan_persistent for GRU layers (batch >= 1).
  bool plan_persistent_gru(int batch, bool backward);
  // U of every direction rounded into recurrent_weight_bf16_ (the GEMM recurrence's bf16 operand).
  void round_recurrent_weights(cudaStream_t stream);
  // prnn_workspace_ grown to at least `bytes` (never shrinks: reserved once, not in a step).
  void reserve_workspace(size_t bytes);
  // The sparse plan for the current masks and batch, and its layouts (uploaded), or none.
  void plan_sparse(int batch);
  // recurrence_path_ from the current plans.
  void describe_choice();
  // Forward (h into hidden_states_) or backward-data (dpre into grad_preactivation_) of every
  // direction through the planned persistent kernel, on ctx.stream().
  void run_persistent(bool backward, int T, int B, const int* lengths, const float* dy);
  // run_persistent for GRU layers (also the gates, candidates and dG of the GEMM path's arrays).
  void run_persistent_gru(bool backward, int T, int B, const int* lengths, const float* dy);

  CudaContext& ctx_;
  DeviceParameters& params_;
  std::string name_;
  int input_size_, hidden_;
  RnnType type_;
  int directions_;
  bool batch_norm_;
  float relu_clip_;
  bool residual_;  // output += input (RnnLayer's residual)
  ParamRef w_[2], u_[2], input_bias_[2], hidden_bias_[2];
  std::unique_ptr<CudaBatchNorm> bn_;
  cublasHandle_t side_blas_ = nullptr;  // bound to ctx.side_stream()

  // Forward state kept for backward (as the CPU layer's).
  DeviceSequences projection_;      // {T, B, D*G*H}: W x
  DeviceSequences preactivation_;   // BN(W x); relu: + U h in place; gru: then gates r, z, n
  DeviceTensor hidden_states_;      // {D, T, B, H}; padding rows are zero
  DeviceTensor hidden_candidate_;   // gru: {D, T, B, H}, U_n h + b_hn
  DeviceTensor step_hidden_gates_;  // gru: {D, B, rnn_padded_ld(3H)}, U h of a step a direction
  DeviceTensor zero_state_;         // {B, H} zeros: h before the first step
  std::vector<int> active_rows_;    // per t: 1 + last batch row valid at t (rows beyond skip GEMMs)

  // Backward scratch.
  DeviceSequences grad_preactivation_;  // {T, B, D*G*H}: dL/d(BN output)
  DeviceSequences grad_projection_;     // {T, B, D*G*H}: dL/d(W x) through the batch norm
  DeviceTensor grad_hidden_gates_;      // gru: {D, T, B, 3H}: dL/d(U h + b_h)
  DeviceTensor carry_;  // {D, 2, gemm_recurrence_carry_size}: dL/dh ping-pong per direction

  // bf16 matmul precision: the projection's operands rounded once per pass (the forward's input
  // and W serve the backward's dX and dW products too), and dL/d(W x); for dU, the states and
  // the gradient it multiplies (dL/d(BN output), or the GRU's hidden gates).
  DeviceArray<uint16_t> input_bf16_, weight_bf16_, grad_bf16_, states_bf16_, grad_recurrent_bf16_;
  // The GEMM recurrence's bf16 operands besides states_bf16_ (which its forward fills): U of each
  // direction, the zero state {B, H}, and one step's gradient per direction {D, B, GH}. These and
  // states_bf16_ are padded as kernels/rnn.h says (rnn_padded_ld).
  DeviceArray<uint16_t> recurrent_weight_bf16_, zero_state_bf16_, step_grad_bf16_;
  // {D, gemm_recurrence_row_capacity, H16}: U h_prev of the clipped-ReLU forward's steps whose
  // GEMM runs padded rows (bf16 or fp32).
  DeviceArray<float> step_products_;

  // Persistent recurrence.
  bool use_persistent_ = true;
  bool ran_persistent_ = false;
  bool forward_ran_persistent_ = false;  // what backward's dU finds rounded (states_bf16_) or not
  std::unique_ptr<PersistentRnnPlan> prnn_plan_;  // directions_ (one launch) or 1 directions
  std::unique_ptr<PersistentGruPlan> gru_plan_;   // GRU layers: likewise, for the forward
  // GRU layers whose backward-data runs its directions the other way than the forward
  // (directions_in_turn_faster decides per pass): that pass's plan; null: gru_plan_.
  std::unique_ptr<PersistentGruPlan> gru_backward_plan_;
  // The last call's judgement (recurrence_path_ says it): in bf16, the passes that run the GEMM
  // recurrence instead of a persistent kernel off the tensor cores (plan_persistent_gru).
  bool gru_gemm_forward_ = false;
  bool gru_gemm_backward_ = false;
  // Likewise for a clipped-ReLU layer: the batch at which an fp32 plan on the fp32-math kernel,
  // or a bf16 one on tensor cores, runs the GEMM recurrence instead, as it is faster
  // (plan_persistent); 0: it does not.
  int relu_gemm_batch_ = 0;
  DeviceArray<float> prnn_workspace_;
  // Sparse persistent recurrence (pruned U).
  std::vector<uint8_t> masks_[2];  // empty: unpruned
  bool masks_changed_ = false;
  bool sparse_chosen_ = false;
  std::unique_ptr<SparsePersistentRnnPlan> sprnn_plan_;
  DeviceArray<int> sprnn_layouts_;  // [direction][forward | backward-data] layout words
  std::string sparse_path_;         // the sparse choice and why, for recurrence_path_
  // The GEMM recurrence's per-step launches, replayed as graphs when a shape repeats.
  StepGraph forward_graph_, backward_graph_;
  std::string recurrence_path_;  // which recurrence the last plan chose, and why
};

}  // namespace ds2
