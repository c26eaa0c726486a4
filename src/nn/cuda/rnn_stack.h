// CudaRnnStack: the forward and backward passes of a stack of unidirectional clipped-ReLU RNN
// layers of one width (h_t = min(max(W x_t + b + U h_{t-1}, 0), clip), input biases, no batch norm;
// optional residual connections y = h + x where the widths match), every recurrence in the
// persistent kernel (nn/cuda/persistent_rnn.h), scheduled one of two ways:
//   sequential: layer after layer, each over all T steps (one projection GEMM, one launch);
//   wavefront:  the sequence cut into chunks of K steps; layer l runs chunk c once layer l-1 has
//               finished chunk c and it has finished chunk c-1, on a stream of its own, so up to
//               concurrent_layers() layers work at once on different SMs (the network-level
//               wavefront of Appleyard et al. 2016, applied to persistent layers).
// A chunk continues from the state the previous chunk left: before the launch, one small GEMM
// adds U h_{t0-1} to the chunk's first pre-activation, and the kernel, which starts from a zero
// state, then computes exactly the recurrence's next step. Backward runs the same chunks from the
// top layer and the last chunk down: the chunk's last dL/dh row gets dpre_{t1} U added (from the
// chunk after it), the backward-data kernel runs, and dx = dpre W (+ dL/dy through a residual)
// goes to the layer below; a layer's dW, dU and db are one GEMM or sum over all T once its chunks
// are done. So the kernels are unchanged, and the results differ from the sequential schedule
// only by the carry-in GEMMs' summation order (in bf16 they round their operands as the
// tensor-core kernels do).
// Both schedules replay as CUDA graphs (core/cuda/step_graph.h). The wavefront runs every chunk in
// full, over copies of x and dy padded with zero rows to a whole number of chunks (the kernels mask
// steps past each utterance's length), so its graphs depend on the number of chunks and the batch
// only and are replayed for every batch of those sizes, whatever T and the lengths.
// The wavefront needs persistent kernels that can share the GPU: the thread-block cluster kernel
// (bf16 weights, H <= 1024, batch <= 8), whose CTAs the hardware schedules as one unit. The
// grid-wide kernels must own all their SMs (two cooperative launches are not guaranteed
// co-resident), so other plans run the sequential schedule; wavefront_why_not() says why.
//
//   CudaRnnStack stack(ctx, /*layers=*/8, /*input=*/512, /*hidden=*/512, /*max_batch=*/4,
//                      /*max_steps=*/256, Precision::kBf16, /*residual=*/true, /*chunk=*/32);
//   std::vector<RnnStackWeights> w = ...;      // per layer: W {H, in}, U {H, H}, b {H} (device)
//   stack.forward(x, w, lengths, device_lengths, T, B, stack.wavefront_possible(), y);
//   std::vector<RnnStackGradients> g = ...;   // per layer: dW, dU, db (device, added to)
//   stack.backward(x, y, w, dy, lengths, device_lengths, T, B, true, dx, g);
#pragma once

#include <cublas_v2.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/cuda/context.h"
#include "core/cuda/device_array.h"
#include "core/cuda/pinned_upload.h"
#include "core/cuda/step_graph.h"
#include "core/precision.h"
#include "nn/cuda/persistent_rnn.h"

namespace ds2 {

// One layer's device parameters: W {hidden, in} and U {hidden, hidden} row-major, b {hidden}.
struct RnnStackWeights {
  const float* w = nullptr;
  const float* u = nullptr;
  const float* bias = nullptr;
};

// One layer's device gradients, shaped as RnnStackWeights.
struct RnnStackGradients {
  float* w = nullptr;
  float* u = nullptr;
  float* bias = nullptr;
};

class CudaRnnStack {
 public:
  // `precision`: the projection GEMMs' and the persistent plan's (bf16: U on chip in bf16).
  // `residual`: layers whose input width equals `hidden` add their input to their output.
  // Throws ds2::Error when the persistent kernel cannot run this layer shape at all.
  CudaRnnStack(CudaContext& ctx, int layers, int input, int hidden, int max_batch, int max_steps,
               Precision precision, bool residual, int chunk = 32, float relu_clip = 20.0f);
  ~CudaRnnStack();
  CudaRnnStack(const CudaRnnStack&) = delete;
  CudaRnnStack& operator=(const CudaRnnStack&) = delete;

  bool wavefront_possible() const { return why_not_.empty(); }
  const std::string& wavefront_why_not() const { return why_not_; }
  // Layers the wavefront runs at once (1 when it is not possible).
  int concurrent_layers() const { return concurrent_; }
  int chunk() const { return chunk_; }
  // true (default): a pass whose shapes, pointers and lengths repeat is replayed as a CUDA graph
  // (core/cuda/step_graph.h); false: every pass is launched from the host.
  void set_use_graphs(bool on);
  // Wavefront passes replayed from a CUDA graph so far, forward and backward (tests).
  int64_t wavefront_replays() const {
    return wavefront_graph_.replays() + backward_wavefront_graph_.replays();
  }
  const PersistentRnnPlan& plan() const { return *plan_; }
  // "8 layers of 512, chunks of 32 steps, up to 8 layers at once (plan: ...)"
  std::string describe() const;

  // x {T, B, input} on the device (zero at padding frames), `lengths` the B lengths on the host
  // (all <= T <= max_steps) and `device_lengths` the same on the device; writes the last layer's
  // output y {T, B, hidden} (zero at padding). Queued on ctx.stream(): whatever is queued there
  // before is seen, and work queued after sees y. `wavefront` false, or not possible: sequential.
  void forward(const float* x, const std::vector<RnnStackWeights>& weights,
               const std::vector<int>& lengths, const int* device_lengths, int T, int B,
               bool wavefront, float* y);
  // What the last forward() kept of layer l, {T, B, hidden} at ld hidden (for tests): its h (y
  // itself for a last layer without a residual) and its output (the input of layer l + 1).
  const float* hidden_states(int l, const float* y) { return h_of(l, const_cast<float*>(y)); }
  const float* layer_output(int l, const float* y) { return output_of(l, const_cast<float*>(y)); }
  // After forward() with the same x, y, weights and lengths (nothing else run on this stack in
  // between): given dy = dL/dy {T, B, hidden}, writes dx = dL/dx {T, B, input} (zero at
  // padding) and adds every layer's dW, dU and db to `grads` (+=, as a CudaLayer accumulates its
  // parameter gradients). Queued on ctx.stream() like forward().
  void backward(const float* x, const float* y, const std::vector<RnnStackWeights>& weights,
                const float* dy, const std::vector<int>& lengths, const int* device_lengths, int T,
                int B, bool wavefront, float* dx, const std::vector<RnnStackGradients>& grads);

 private:
  int layer_input(int l) const { return l == 0 ? input_ : hidden_; }
  bool adds_input(int l) const { return residual_ && layer_input(l) == hidden_; }
  // Layer l's h (straight into y for a last layer without a residual), its output where layer
  // l + 1 reads it (h itself, or the residual sum), and its input.
  float* h_of(int l, float* y);
  float* output_of(int l, float* y);
  const float* input_of(int l, const float* x, float* y);
  // Start of layer l's {padded_steps, max_batch, hidden} block in the per-layer buffers.
  int64_t layer_offset(int l) const;
  // The stream and cuBLAS handle of a concurrent slot; slot -1: the context's.
  cudaStream_t stream_of(int slot) const;
  cublasHandle_t blas_of(int slot) const;
  // A wavefront pass on the concurrent streams, forked from and joined back to ctx.stream():
  // `unit(l, c, slot)` queues layer l's chunk c once the feeding layer (l - 1 forward, l + 1
  // backward) has finished that chunk and layer l its previous one (c - 1 forward, c + 1
  // backward); `finish(l, slot)`, if given, queues after a layer's last chunk.
  void record_wavefront(int chunks, bool backward,
                        const std::function<void(int l, int c, int slot)>& unit,
                        const std::function<void(int l, int slot)>& finish);
  // Backward of steps [t0, t0 + steps) of layer l: dL/dh staged with the carry-in from step t1 =
  // t0 + steps (unless the last chunk), backward-data into dpre, dx = dpre W (+ g) into `dx`.
  void run_backward_chunk(int l, const RnnStackWeights& w, const float* h, const float* g,
                          float* dx, int t0, int steps, int T, int B, const int* chunk_lengths,
                          int slot);
  // dW, dU and db of layer l over all T steps (its dpre complete).
  void layer_weight_gradients(int l, const float* x, const float* h, const RnnStackGradients& grads,
                              int T, int B, int slot);
  // The gradient flowing into layer l's output: dy for the last layer, else layer l + 1's dx.
  const float* grad_into(int l, const float* dy);
  float* grad_out_of(int l, float* dx);
  void check_call(const char* what, size_t layers, const std::vector<int>& lengths, int T,
                  int B) const;
  // Fills the per-chunk device lengths and returns the number of chunks.
  int upload_chunk_lengths(const std::vector<int>& lengths, int T, int B);
  // Copies the T rows of {T, B, width} `src` into `padded` and zeroes its rows up to `rows`.
  void stage_padded(const float* src, int T, int rows, int B, int width, float* padded);
  // Steps [t0, t0 + steps) of layer l: projection, carry-in, recurrence into h, residual into y.
  // `chunk_lengths`: the B device lengths relative to t0, capped at `steps`. `slot`: the
  // concurrent stream (and its cuBLAS handle and workspace) to run on; -1 the context's stream.
  void run_chunk(int l, const float* x, const RnnStackWeights& w, float* h, float* y, int t0,
                 int steps, int B, const int* chunk_lengths, int slot);

  CudaContext& ctx_;
  int layers_, input_, hidden_, max_batch_, max_steps_, chunk_;
  int padded_steps_;  // max_steps rounded up to whole chunks: the per-layer buffers' rows
  Precision precision_;
  bool residual_;
  float relu_clip_;
  std::unique_ptr<PersistentRnnPlan> plan_;
  std::string why_not_;
  int concurrent_ = 1;

  DeviceArray<float> pre_;         // per layer {max_steps, max_batch, hidden}: W x + b (+ U h);
                                   // backward: dpre
  DeviceArray<float> h_;           // per layer: the recurrence's h
  DeviceArray<float> outputs_;     // per layer but the last: h + x when residual (else h_)
  DeviceArray<float> workspace_;   // the plan's, per concurrent layer
  DeviceArray<float> grad_stage_;  // per layer: dL/dh of a chunk with its carry-in (backward)
  DeviceArray<float> grad_links_;  // per layer but the first: its dx, the layer below's dL/dy
  // The wavefront runs every chunk in full over padded copies of its inputs and outputs ({chunks x
  // chunk, max_batch, width}; rows past T zero), so its CUDA graphs depend on the number of chunks
  // and the batch, not on T or the lengths, and are replayed across batches.
  DeviceArray<float> x_pad_, y_pad_, dy_pad_, dx_pad_;
  DeviceArray<int> chunk_lengths_;
  std::vector<int> host_chunk_lengths_;
  PinnedUpload lengths_staging_;
  std::vector<cudaStream_t> streams_;    // one per concurrent layer
  std::vector<cublasHandle_t> handles_;  // bound to streams_, each with its own workspace
  DeviceArray<char> blas_workspace_;
  std::vector<cudaEvent_t> chunk_done_;  // [layer][chunk]: output steps of the chunk written
  std::vector<cudaEvent_t> layer_done_;  // [layer]: all its work of the pass queued so far done
  cudaEvent_t start_ = nullptr;
  StepGraph sequential_graph_, wavefront_graph_, backward_sequential_graph_,
      backward_wavefront_graph_;
};

}  // namespace ds2
