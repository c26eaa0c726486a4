// Persistent GRU: the recurrence of a GRU layer (nn/rnn_layer.h's formulation) in one cooperative
// kernel per pass that keeps the CTA's slice of U on chip for all timesteps
// (kernels/persistent_gru.h has the kernel and its contract), with the API of the clipped-ReLU
// persistent RNN (nn/cuda/persistent_rnn.h): a plan built once per layer shape and device, a
// workspace size, and forward / backward-data calls on a stream. The input projection and the
// weight gradients stay cuBLAS GEMMs done by the caller (CudaRnnLayer). fp32 weights and math;
// results are deterministic (fixed reduction order). Each pass runs on tensor cores where it fits
// (4 batch rows a set of CTAs, past batch 4 in batch groups: one direction to batch 32, both to 16;
// U and the state split into fp16 halves, fp32 accuracy, a tagged exchange instead
// of a step barrier: kernels/persistent_rnn_mma.h, pgru_mma_forward_launch and
// pgru_mma_backward_launch; backward-data with its gradients scaled into fp16's range, and rerun
// on the fp32-math kernel, decided on the device, where they overflow); elsewhere the passes run
// kernels/persistent_gru.h's fp32-math kernel, which past what the chip holds (H 1569-2048 on an
// H200, one direction, batch 1-8) streams a CTA's last rows from L2 every step.
//
//   PersistentGruPlan plan(/*hidden=*/1024, /*max_batch=*/4, /*directions=*/2);
//   if (!plan.fits()) std::cerr << plan.why_not() << "\n";          // then the GEMM recurrence
//   DeviceArray<float> ws(plan.workspace_bytes() / sizeof(float) + 1);
//   kernels::PgruDirection d[2] = {...};                              // per direction's operands
//   persistent_gru_forward(plan, d, lengths, T, B, ws.data(), plan.workspace_bytes(), stream);
//   persistent_gru_backward_data(plan, d, lengths, T, B, ws.data(), plan.workspace_bytes(),
//   stream);
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "core/precision.h"
#include "kernels/persistent_gru.h"
#include "kernels/persistent_gru_single.h"
#include "kernels/persistent_rnn.h"

namespace ds2 {

class PersistentGruPlan {
 public:
  // `directions` = 2 plans one launch for both directions (the SMs split between them).
  // device -1: the current device. Weights stay fp32; a bf16 plan adds bf16 passes on tensor
  // cores, sets of 8, 16 or 32 batch rows with U rounded to bf16 as the GEMM recurrence on bf16
  // operands computes it: the forward wherever a kernel fits, backward-data where the fp32 split's
  // does not reach (past its batch groups or sizes) and the batch is not 1 on chip.
  // `tensor_cores` false keeps both passes on the fp32-math kernel (benchmarks time it beside).
  // `streamed_rows`: one direction at batch <= kernels::kPrnnStreamedMaxBatch past what registers
  // and shared memory hold streams each CTA's last row groups from L2 every pass
  // (kernels::PgruPass::streamed_groups); tests force at least `min_streamed_groups` a pass on
  // the fp32-math kernel at any size (either direction count).
  PersistentGruPlan(int hidden, int max_batch, int directions = 1, int device = -1,
                    Precision precision = Precision::kFp32, bool tensor_cores = true,
                    bool streamed_rows = true, int min_streamed_groups = 0);

  bool fits() const { return fits_; }
  // Whether the fp32-math kernel's tiling fits too: a bf16 plan may fit without it, both passes
  // on bf16 tensor cores (then tiling() launches nothing).
  bool fp32_math_fits() const { return fits_ && fp32_math_fits_; }
  const std::string& why_not() const { return why_not_; }
  int hidden() const { return tiling_.hidden; }
  int max_batch() const { return tiling_.max_batch; }
  int directions() const { return tiling_.directions; }
  int device() const { return device_; }
  Precision precision() const { return precision_; }  // as asked for, whether it fits or not
  size_t workspace_bytes() const;
  const kernels::PgruTiling& tiling() const { return tiling_; }
  // Whether each pass runs on tensor cores, and its tiling (PrnnTiling::gru) where it does.
  bool forward_on_tensor_cores() const { return mma_tiling_[0].gru; }
  // Whether the forward runs on one CTA or a cluster a direction holding all of U
  // (kernels/persistent_gru_single.h: fp32, batch 1 to H 384, batch 2 to H 320, batch 3-4 to
  // kernels::kPgruSingleMaxHiddenBatchTile4), and its tiling where it does.
  bool forward_single_cta() const { return single_.ctas_per_direction > 0; }
  const kernels::PgruSingleTiling& single_cta_tiling() const { return single_; }
  bool backward_on_tensor_cores() const { return mma_tiling_[1].gru; }
  // Whether that pass runs on tensor cores in bf16 (U rounded; a bf16 plan's).
  bool pass_in_bf16(bool backward) const {
    return mma_tiling_[backward ? 1 : 0].gru && mma_tiling_[backward ? 1 : 0].bf16_weights;
  }
  const kernels::PrnnTiling& mma_forward_tiling() const { return mma_tiling_[0]; }
  const kernels::PrnnTiling& mma_backward_tiling() const { return mma_tiling_[1]; }
  // Whether backward-data's tensor-core launch is the fp16 split's, which the fp32-math kernel
  // reruns where its scaled gradients overflowed (not bf16's).
  bool backward_reruns_on_overflow() const {
    return backward_on_tensor_cores() && !pass_in_bf16(true);
  }
  // Where in the workspace backward-data's fp32-math rerun keeps its own (past the tensor-core
  // launch's overflow word, which the rerun reads as it starts).
  size_t fallback_workspace_offset() const;
  // "persistent GRU hidden 1024, batch <= 4, 2 directions in one launch: 256 CTAs ..."
  std::string describe() const;

  // The largest hidden size (a multiple of 32) whose plan fits on `device` for this batch: with
  // U on chip, or with `streamed` rows allowed too.
  static int max_hidden(int max_batch, int directions = 1, int device = -1, bool streamed = false);

 private:
  void plan_mma(bool backward, int ctas_max, size_t smem_optin, bool bf16 = false);
  void plan_single_cta(size_t smem_optin);

  kernels::PgruTiling tiling_;
  // Forward, backward-data: gru set only where the pass runs on tensor cores.
  kernels::PrnnTiling mma_tiling_[2];
  int mma_registers_[2] = {0, 0};
  kernels::PgruSingleTiling single_;  // ctas_per_direction 0: the forward runs elsewhere
  int single_registers_ = 0;
  int device_ = 0;
  Precision precision_ = Precision::kFp32;
  int sm_count_ = 0;
  int registers_[2] = {0, 0};  // forward, backward-data
  bool fits_ = false;
  bool fp32_math_fits_ = true;  // false: a bf16 plan without the fp32-math kernel (fits())
  std::string why_not_;
};

// plan.directions() directions in one launch (dirs[0 .. plan.directions())).
void persistent_gru_forward(const PersistentGruPlan& plan, const kernels::PgruDirection* dirs,
                            const int* lengths, int T, int B, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream);
void persistent_gru_backward_data(const PersistentGruPlan& plan, const kernels::PgruDirection* dirs,
                                  const int* lengths, int T, int B, void* workspace,
                                  size_t workspace_bytes, cudaStream_t stream);

// Whether a bidirectional GRU layer's forward (backward-data: `backward`) is faster run one
// direction after the other on `one` (a one-direction plan) than with both directions in one
// launch on `both`; both plans fit. True where that pass of `one` is on tensor cores and that of
// `both` is not; backward-data from batch 3 (kernels/NOTES.md, session 56). The passes may
// differ: a layer then holds both plans. The clipped-ReLU layer's rule is
// nn/cuda/persistent_rnn.h's.
bool directions_in_turn_faster(const PersistentGruPlan& both, const PersistentGruPlan& one,
                               bool backward);

}  // namespace ds2
