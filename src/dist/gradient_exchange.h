// GradientExchange: the data-parallel gradient allreduce. Attached to a model's backward pass as
// its BackwardListener, it starts reducing each bucket of the flat gradient buffer (sum over
// ranks) as soon as backward has finished the bucket's layers, so communication overlaps the
// rest of backward; finish() then waits for what is still in flight. The caller scales the loss
// gradient by 1 / (utterances over all ranks) beforehand, so the sum is the global mean.
//
//   auto exchange = make_mpi_gradient_exchange(world, grads, plan, /*bf16=*/false);
//   exchange->begin();
//   model.backward(grad_logits, exchange.get());
//   exchange->finish();                  // grads now hold the sum over ranks
#pragma once

#include <memory>

#include "dist/bucket_plan.h"
#include "dist/world.h"
#include "nn/backward_listener.h"

namespace ds2::dist {

class GradientExchange : public BackwardListener {
 public:
  // Before the backward pass of a step.
  virtual void begin() = 0;
  // Launches the buckets that layer `layer` completes.
  void gradients_ready(size_t layer) override = 0;
  // Returns when every bucket is reduced (on the GPU: when the compute stream will wait for it).
  virtual void finish() = 0;
  // Milliseconds of the last step spent waiting for communication that backward did not hide
  // (on the GPU, valid after the stream was synchronized).
  virtual double exposed_wait_ms() = 0;
  virtual const BucketPlan& plan() const = 0;
  // For a rank without utterances this step: every layer reported done, in backward's order, so
  // its (zeroed) gradients still join each bucket's sum.
  void all_gradients_ready() {
    for (size_t layer = plan().layers(); layer-- > 0;) gradients_ready(layer);
  }
};

// The CPU backend's exchange: MPI_Iallreduce per bucket (in fp32, or in bf16 with a summing
// operator of its own), MPI_Waitall in finish(), watched by the world's watchdog.
std::unique_ptr<GradientExchange> make_mpi_gradient_exchange(World& world, float* grads,
                                                             BucketPlan plan, bool bf16);

}  // namespace ds2::dist
