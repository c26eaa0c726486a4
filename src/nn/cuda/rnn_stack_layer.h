// CudaRnnStackLayer: consecutive unidirectional clipped-ReLU RNN layers of a model (no batch norm,
// nothing between them) run as one CudaLayer, so that the training engine can run them as a
// wavefront (nn/cuda/rnn_stack.h): layer l + 1 works on chunk c while layer l works on chunk
// c + 1. CudaModel builds one for every such run of two or more layers (its
// describe_recurrences() names them). Where the wavefront cannot run (fp32, a batch beyond the
// cluster kernel's, pruning masks, or set_use_wavefront(false)) the layers run one after another as
// the CudaRnnLayers they are otherwise, so those cases compute exactly what they computed before
// grouping. Same contract as every CudaLayer: padding frames zero, parameter gradients accumulated.
//
//   std::vector<const RnnLayer*> run = {rnn0, rnn1, rnn2};   // can_follow() holds for each pair
//   CudaRnnStackLayer stack(ctx, params, run);
//   stack.forward(x, y, /*training=*/true);                  // x {T, B, in}, y {T, B, H}
//   stack.backward(x, y, dy, dx);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/cuda/cuda_layer.h"
#include "nn/cuda/rnn_layer_cuda.h"
#include "nn/cuda/rnn_stack.h"
#include "nn/rnn_layer.h"

namespace ds2 {

class CudaRnnStackLayer : public CudaLayer {
 public:
  // Whether `layer` can be part of a stack at all (unidirectional clipped ReLU, no batch norm),
  // and whether `next` can directly follow `prev` in one (same width and clip, and the residual
  // connection the stack gives every layer whose input width is its own).
  static bool can_stack(const RnnLayer& layer);
  static bool can_follow(const RnnLayer& prev, const RnnLayer& next);

  CudaRnnStackLayer(CudaContext& ctx, DeviceParameters& params,
                    const std::vector<const RnnLayer*>& layers);

  std::string name() const override;
  void forward(const DeviceSequences& in, DeviceSequences& out, bool training) override;
  void backward(const DeviceSequences& in, const DeviceSequences& out,
                const DeviceSequences& grad_out, DeviceSequences& grad_in) override;

  int size() const { return static_cast<int>(layers_.size()); }
  CudaRnnLayer& layer(int i) { return *layers_[static_cast<size_t>(i)]; }
  const CudaRnnLayer& layer(int i) const { return *layers_[static_cast<size_t>(i)]; }
  // true (default): the wavefront wherever it can run; false: always layer after layer.
  void set_use_wavefront(bool on) { use_wavefront_ = on; }
  // Whether the last forward ran the wavefront, and what it ran: "wavefront: 30 layers ..." or
  // why the layers ran one after another (put into words only when asked, not every step).
  bool ran_wavefront() const { return path_ == Path::kWavefront; }
  std::string path() const;

 private:
  enum class Path { kNotRun, kWavefront, kSwitchedOff, kPruned, kNoStack, kBatch, kNoCluster };
  // Which path this batch shape takes: (re)builds the stack when T or B outgrow it.
  Path plan_wavefront(int T, int B);
  bool has_masks() const;

  CudaContext& ctx_;
  std::vector<std::unique_ptr<CudaRnnLayer>> layers_;
  std::vector<const RnnLayer*> host_;
  std::unique_ptr<CudaRnnStack> stack_;
  std::string stack_failed_;  // why the stack cannot be built for these layers, once known
  int stack_steps_ = 0, stack_batch_ = 0;
  int refused_batch_ = 1 << 30;  // the smallest batch found beyond the cluster kernel
  bool use_wavefront_ = true;
  Path path_ = Path::kNotRun;
  int last_batch_ = 0;
  std::vector<RnnStackWeights> weights_;
  std::vector<RnnStackGradients> grads_;
  // Layer after layer: the outputs between the layers and two gradient buffers in turn.
  std::vector<DeviceSequences> between_;
  DeviceSequences grad_a_, grad_b_;
};

}  // namespace ds2
