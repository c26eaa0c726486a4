// BackwardListener: told, during a model's backward pass, when each layer's parameter gradients
// are final, so a gradient allreduce can start on them while earlier layers still compute (layers
// finish in reverse order).
//
//   model.backward(grad_logits, &exchange);   // exchange.gradients_ready(i) after layer i
#pragma once

#include <cstddef>

namespace ds2 {

class BackwardListener {
 public:
  virtual ~BackwardListener() = default;
  // Layer `layer` (an index into Model::layers()) has written all its parameter gradients; on the
  // GPU, the work that writes them is queued, on the main stream or the weight-gradient stream:
  // CudaContext::record_gradients_final marks the point where both are done.
  virtual void gradients_ready(size_t layer) = 0;
};

}  // namespace ds2
