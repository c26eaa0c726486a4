// The GPU gradient exchange: NCCL allreduce of each gradient bucket on a communication stream of
// its own, started (after an event on the compute stream) as soon as backward has queued the
// bucket's last gradient, so the reduction overlaps the rest of backward. Rank 0 creates the NCCL
// id and MPI broadcasts it; the communicator is non-blocking, so the world's watchdog can abort it
// (ncclCommAbort) when a peer hangs. bf16 reductions convert on the communication stream.
//
//   auto exchange = make_nccl_gradient_exchange(world, ctx, grads, plan, /*bf16=*/false,
//                                               /*max_ctas=*/8);
//   exchange->begin();  model.backward(grad, exchange.get());  exchange->finish();
//   // the compute stream now waits for the reduced gradients
#pragma once

#include <memory>

#include "core/cuda/context.h"
#include "dist/gradient_exchange.h"

namespace ds2::dist {

// Throws when this build has no NCCL. max_ctas > 0 caps the CTAs (SMs) NCCL's kernels occupy
// (ncclConfig_t::maxCTAs), leaving the rest to the compute running beside the reduction.
std::unique_ptr<GradientExchange> make_nccl_gradient_exchange(World& world, CudaContext& ctx,
                                                              float* grads, BucketPlan plan,
                                                              bool bf16, int max_ctas = 0);

}  // namespace ds2::dist
