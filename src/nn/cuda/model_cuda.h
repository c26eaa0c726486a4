// CudaModel: the GPU twin of Model (nn/model.h), built layer by layer from a host Model, whose
// parameter layout it shares through DeviceParameters. The host model is the source of truth for
// structure and checkpoints; the live weights of a GPU run are in params().
//
//   ds2::CudaModel gpu(ctx, host_model);            // uploads the host weights
//   gpu.forward(features, /*training=*/true);        // DeviceSequences {T, B, F}
//   gpu.params().zero_grads();
//   gpu.backward(grad_logits);
//   gpu.params().download_to(host_model.parameters());
//
// With timing on, every layer's forward and backward is bracketed by CUDA events, and
// layer_times() sums them per layer kind ("Conv2d", "BatchNorm", "RNN", ...) for `ds2 bench`.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nn/cuda/cuda_layer.h"
#include "nn/model.h"

namespace ds2 {

class CudaRnnLayer;
class CudaRnnStackLayer;

class CudaModel {
 public:
  CudaModel(CudaContext& ctx, Model& host);
  ~CudaModel();
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  DeviceParameters& params() { return params_; }
  void forward(const DeviceSequences& features, bool training);
  const DeviceSequences& logits() const { return activations_.back(); }
  // `listener` hears when each layer's gradient work has been queued (nn/backward_listener.h).
  void backward(const DeviceSequences& grad_logits, BackwardListener* listener = nullptr);
  // Reseeds dropout layers (as Model::initialize does for the CPU's).
  void reseed_dropout(uint64_t seed);
  // The seed each dropout layer's next training forward will use, by layer name, and back (for
  // exact resume).
  std::map<std::string, uint64_t> dropout_seeds() const;
  void set_dropout_seeds(const std::map<std::string, uint64_t>& seeds);

  // One line per recurrent layer: "rnn0: persistent recurrence (...)" or "rnn0: GEMM
  // recurrence (...)", as chosen by the last forward.
  std::string describe_recurrences() const;
  // Two or more unidirectional clipped-ReLU layers in a row run as one CudaRnnStackLayer: a
  // wavefront of chunks where the GPU can (nn/cuda/rnn_stack_layer.h). true by default; false
  // runs them layer after layer (train.rnn_wavefront).
  void set_use_wavefront(bool on);
  // true by default: every recurrent layer runs the persistent recurrence where its plan fits;
  // false: the GEMM recurrence everywhere (train.persistent_rnn; call set_use_wavefront(false)
  // too, the wavefront being persistent kernels).
  void set_use_persistent(bool on);

  // Pruning masks of recurrent matrices by their offset in the flat parameters (H x H bytes,
  // 0 = pruned), for every RNN layer's U: layers with masks may run the sparse persistent
  // recurrence (CudaRnnLayer::set_recurrent_masks). An empty map clears them.
  void set_recurrent_masks(const std::map<int64_t, const uint8_t*>& by_offset);

  void set_timing(bool on);
  // Milliseconds per layer kind, forward + backward, summed since set_timing(true); waits for
  // the stream.
  std::map<std::string, double> layer_times();
  // The same per layer, in layer order.
  std::vector<double> per_layer_ms();
  // Device bytes each layer allocated while it ran (activations, workspaces, plans), summed over
  // every forward and backward so far: after reserve(), what the layer holds.
  const std::vector<int64_t>& layer_device_bytes() const { return layer_bytes_; }

 private:
  struct Timing;
  void time_begin(size_t layer);
  void time_end(size_t layer);

  CudaContext& ctx_;
  Model& host_;
  DeviceParameters params_;
  // One entry per host layer; a stack sits at its first layer's index and the indices it also
  // covers hold null. spans_[i]: host layers that layers_[i] runs (0 for covered indices).
  std::vector<std::unique_ptr<CudaLayer>> layers_;
  std::vector<int> spans_;
  std::vector<CudaRnnStackLayer*> stacks_;
  std::vector<CudaRnnLayer*> rnn_layers_;  // every recurrent layer, inside stacks too
  std::vector<std::string> kinds_;
  std::vector<DeviceSequences> activations_;
  DeviceSequences grad_a_, grad_b_;
  const DeviceSequences* input_ = nullptr;
  std::unique_ptr<Timing> timing_;
  std::vector<int64_t> layer_bytes_;
  int64_t bytes_before_ = 0;
};

}  // namespace ds2
