// A CPU RnnLayer with freshly initialized parameters (clip 20, batch-norm momentum 0.1) and the
// CudaRnnLayer on their device copy: the setup the GPU layer tests share.
//
//   ds2::Rng rng(60);
//   ds2::RnnLayerPair layer(ctx, rng, "gru", in, H, ds2::RnnType::kGru, /*bidirectional=*/true);
//   layer.gpu.forward(xd, yd, true);
//   layer.params.download_grads(grads);
#pragma once

#include <string>

#include "core/cuda/context.h"
#include "core/rng.h"
#include "nn/cuda/device_parameters.h"
#include "nn/cuda/rnn_layer_cuda.h"
#include "nn/parameters.h"
#include "nn/rnn_layer.h"

namespace ds2 {

struct RnnLayerPair {
  RnnLayerPair(CudaContext& ctx, Rng& rng, const std::string& name, int input_size, int hidden,
               RnnType type, bool bidirectional, bool batch_norm = false)
      : cpu(name, store, input_size, hidden, type, bidirectional, batch_norm, 20.0f, 0.1f),
        params(ctx, initialized(store, rng)),
        gpu(ctx, params, cpu) {}

  ParameterStore store;  // before cpu, which registers its parameters in it
  RnnLayer cpu;
  DeviceParameters params;
  CudaRnnLayer gpu;

 private:
  static const ParameterStore& initialized(ParameterStore& store, Rng& rng) {
    store.finalize();
    store.initialize(rng);
    return store;
  }
};

}  // namespace ds2
