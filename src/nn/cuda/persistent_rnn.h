// Persistent RNN: a small library API, modeled on cuDNN's RNN calls, for the recurrence of a
// clipped-ReLU RNN layer (version 3: U on chip in fp32 or bf16; bf16 on tensor cores). The whole
// recurrence of T timesteps runs in ONE cooperative kernel that keeps U (forward) or U^T
// (backward-data) on chip for all timesteps (kernels/persistent_rnn.h has the kernel and its
// design). The input projection W x and the weight gradients dU, dW stay cuBLAS GEMMs done by the
// caller, as in CudaRnnLayer.
//
//   PersistentRnnPlan plan(/*hidden=*/1152, /*max_batch=*/4);     // once per (H, batch, device)
//   if (!plan.fits()) std::cerr << plan.why_not() << "\n";         // then use the GEMM RNN
//   DeviceArray<float> ws(plan.workspace_bytes() / sizeof(float));
//   persistent_rnn_forward(plan, u, pre, P, h, lengths, T, B, /*reverse=*/false, 20.0f,
//                          ws.data(), plan.workspace_bytes(), stream);
//   persistent_rnn_backward_data(plan, u, h, dy, H, dpre, P, lengths, T, B, false, 20.0f,
//                                ws.data(), plan.workspace_bytes(), stream);
//   std::cout << PersistentRnnPlan::max_hidden(4) << "\n";         // largest H this GPU runs
//
// Contract (exactly CudaRnnLayer's GEMM recurrence for one direction): row (t, b) of pre, dy,
// dpre is at (t * B + b) * ld (pre and dpre already offset to the direction's columns), h is
// {T, B, H}; lengths are the B device lengths; frames t >= lengths[b] get h = 0 and dpre = 0;
// the reverse direction starts at each utterance's own last frame.
//   forward:        h_t = min(max(pre_t + h_prev U^T, 0), clip)   (pre is only read)
//   backward-data:  dpre_t = (0 < h_t < clip) ? dy_t + dpre_next U : 0, for every t, where
//                   dpre_next is the previous step of the backward recurrence (zero at first).
// A bf16 plan uses U rounded to bf16 (nearest even). Where U fits the tensor-core kernel's
// registers, and past them its shared memory (tiling().state_in_bf16(): one direction up to H
// 3072, both directions in one launch up to H 2560 on an H200) the state is rounded to bf16 as well
// and the products run on tensor cores with fp32 sums, as a bf16 cuBLAS GEMM would compute them
// (past batch 8, 2 or 4 sets of CTAs a direction each run a slice of the batch and read only its
// state, at up to 3 times the rows a CTA: tiling().batch_groups); otherwise h, products and sums
// stay fp32. An fp32 plan at batch 2-4 (batch 1: from H 513) may run on tensor cores too
// (tiling().tensor_cores without bf16): U and the state are each split into two fp16 halves (4
// bytes a weight; U within ~2^-22 relative, the exchanged state within 2^-20, its halves carrying
// the step tags), fp16 products of hi and lo; fp32 accuracy (y itself is not rounded). One
// direction runs up to H 2560 on 132 SMs, both directions in one launch up to H 2048 (where 16-row
// tiles would put 32 rows on a CTA and 8-row tiles 24, the stacked split:
// kernels/persistent_rnn_mma.h); backward-data exchanges the gradient times a power of two chosen
// from the largest |dy| (fp16's range), and where a scaled value still overflows it reruns on the
// fp32-math kernel (fallback(), queued behind it and skipped on the device when not needed), which
// also runs the forward when clip > 32768. Everything is queued on `stream`; no host
// synchronization. Results are deterministic (fixed reduction order) and identical for every plan
// of the same hidden size, precision and kernel kind (tensor cores or not, and for the fp32-math
// kernel its columns per thread, tiling().chunks). One direction at batch <= 8 past what the chip
// holds (fp32 from H 3073, bf16 from H 3681-3969 on an H200) streams the rows that do not fit
// from L2 every step (tiling().streamed_groups; up to fp32 H 4096-5120, bf16 4096-8192 by batch);
// a bidirectional layer there runs its directions one after the other.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/precision.h"
#include "kernels/persistent_rnn.h"

namespace ds2 {

// Kernel families a plan may choose from; benchmarks and tests switch one off to compare it with
// what the plan picks otherwise.
struct PersistentRnnKernels {
  bool cluster = true;  // bf16: one thread-block cluster per direction
  // The exchange synchronizes through its data (bf16 grid-wide at batch <= 8, fp32 at batch 1,
  // and fp32 on tensor cores with split operands, which exist only tagged)
  bool tagged_exchange = true;
  // fp32 on tensor cores (U and the state split into fp16 halves)
  bool fp16_split = true;
  // ... in 8-row m-tiles of hi over lo where 16-row ones would put more rows on a CTA (off: the
  // 16-row form, which GPUs with fewer SMs run anyway, where 8-row tiles save no rows)
  bool stacked_split = true;
  // bf16 past batch 8, fp32 (the fp16 split) past batch 4: sets of CTAs per direction, each on a
  // slice of the batch (kernels::PrnnTiling::batch_groups)
  bool batch_groups = true;
  // fp32-math kernel, layers past what registers and shared memory hold: each CTA's last row
  // groups streamed from L2 every step (kernels::PrnnTiling::streamed_groups)
  bool streamed_rows = true;
  // Tests: the fp32-math kernel with at least this many streamed row groups a CTA, no tensor
  // cores (the streamed form at sizes that fit on chip); 0: as the plan chooses
  int min_streamed_groups = 0;
  // fp32 small layers at small batch: one CTA per direction (or a cluster of 8-16 at batch 1-2),
  // all of U in registers, the state in shared memory (kernels/persistent_rnn_single.h)
  bool single_cta = true;
  // Tests: that kernel wherever one runs (without spills), not only where it was measured faster
  // (H times the batch tile <= 256, and the clusters)
  bool force_single_cta = false;
};
// No tagged exchange: the cluster kernel wherever it runs, else a step barrier (the wavefront
// stack needs the cluster's co-resident launches; benchmarks time the barrier beside the tags).
constexpr PersistentRnnKernels kClusterBeforeGrid{true, false};

class PersistentRnnPlan {
 public:
  // `directions` = 2 plans one launch running both directions of a bidirectional layer at once
  // (the SMs split between them). device -1: the current device. `precision`: how U is held on
  // chip, fp32 or bf16 (rounded to nearest even; more rows fit); h, products and sums are fp32.
  // `allowed`: the kernel families to choose from (all by default).
  PersistentRnnPlan(int hidden, int max_batch, int directions = 1, int device = -1,
                    Precision precision = Precision::kFp32, PersistentRnnKernels allowed = {});

  // Whether this layer runs on this GPU; if not, why_not() says why (the caller falls back).
  bool fits() const { return fits_; }
  const std::string& why_not() const { return why_not_; }

  int hidden() const { return tiling_.hidden; }
  int max_batch() const { return tiling_.max_batch; }
  int directions() const { return tiling_.directions; }
  Precision precision() const { return tiling_.bf16_weights ? Precision::kBf16 : Precision::kFp32; }
  int device() const { return device_; }
  // Bytes of device workspace every call needs (any contents; not kept between calls).
  size_t workspace_bytes() const;
  size_t shared_bytes() const;
  int registers_per_thread() const { return registers_; }
  const kernels::PrnnTiling& tiling() const { return tiling_; }
  // Under the fp16 split: the fp32-math plan that reruns backward-data when the scaled gradients
  // overflow fp16, and runs the forward when the clip exceeds fp16's range; else nullptr.
  const PersistentRnnPlan* fallback() const { return fallback_plan_.get(); }
  // Where the fallback's workspace starts within workspace_bytes() (after the split's own, whose
  // overflow word the fallback reads).
  size_t fallback_workspace_offset() const;
  // "H=1152 B<=4 x1: 96 CTAs x 288 threads, 12 rows/CTA (12 in registers), 138 regs, ..."
  std::string describe() const;

  // The largest hidden size (a multiple of 32) whose plan fits on `device` for this batch,
  // number of directions and precision: with U on chip, or with `streamed` rows allowed too.
  static int max_hidden(int max_batch, int directions = 1, int device = -1,
                        Precision precision = Precision::kFp32, bool streamed = false);

 private:
  kernels::PrnnTiling tiling_;
  std::shared_ptr<const PersistentRnnPlan> fallback_plan_;  // see fallback()
  int device_ = 0;
  int sm_count_ = 0;
  int registers_ = 0;
  bool fits_ = false;
  std::string why_not_;
};

// Whether a bidirectional layer is faster run one direction after the other on `one` (a
// one-direction plan) than with both directions in one launch on `both` (two directions, the SMs
// split between them); both plans fit. True where only `one` is on tensor cores (at half the SMs
// a direction, U no longer fits the tensor-core kernel: bf16 past H 2560, fp32 past the split's
// sizes) from the batch where the fp32-math kernel's products outweigh the second launch
// (kernels/NOTES.md, session 55).
bool directions_in_turn_faster(const PersistentRnnPlan& both, const PersistentRnnPlan& one);

// One direction's operands for the calls that run several directions in one launch.
struct PersistentRnnDirection {
  const float* u = nullptr;  // U {H, H} row-major
  const float* x = nullptr;  // forward: pre; backward-data: dy (dL/dh from the layer above)
  int64_t ld_x = 0;
  const float* h = nullptr;  // backward-data: the forward's h {T, B, H}; unused by forward
  float* y = nullptr;        // forward: h {T, B, H}; backward-data: dpre
  int64_t ld_y = 0;
  bool reverse = false;
  // Sparse plans only (nn/cuda/sparse_persistent_rnn.h): the device layout of U's kept weights
  // for this pass, SparsePersistentRnnPlan::layout(mask, backward) uploaded.
  const uint32_t* layout = nullptr;
};

// Whether a tensor-core tiling runs on this device: its kernel exists, fits in `smem_optin` bytes
// of shared memory, does not spill, and its CTAs (one cluster per direction, or the whole
// cooperative grid) can be resident on `sm_count` SMs; then its registers a thread go to
// `registers`. The clipped-ReLU plans and the GRU's tensor-core passes take tilings by it.
bool tensor_tiling_runs(const kernels::PrnnTiling& c, size_t smem_optin, int sm_count,
                        int* registers);

// Where the fp32-math rerun behind a tensor-core pass keeps its part of one workspace: past the
// first launch's `bytes` (which hold the overflow word the rerun reads), 256-byte aligned.
size_t rerun_workspace_offset(size_t bytes);

// "106.0 KB": how the persistent plans' describe() give sizes.
std::string kilobytes(size_t bytes);

// The checks every persistent call makes, dense, sparse or GRU (`kernel` names which in
// messages): the plan fits, the batch, the workspace, the device.
void check_persistent_launch(const char* kernel, const char* what, bool fits,
                             const std::string& why_not, int B, int max_batch,
                             size_t workspace_bytes, size_t needed_bytes, int plan_device);
// Shared by the clipped-ReLU calls, dense and sparse: check_persistent_launch and the clip; and
// the kernel-level operands of `n` directions (h of the forward at ld `hidden`).
void check_persistent_call(const char* kernel, const char* what, bool fits,
                           const std::string& why_not, int B, int max_batch, size_t workspace_bytes,
                           size_t needed_bytes, int plan_device, float clip);
void to_kernel_directions(const PersistentRnnDirection* dirs, int n, int hidden,
                          kernels::PrnnDirection* out);

// One direction (plan.directions() must be 1).
void persistent_rnn_forward(const PersistentRnnPlan& plan, const float* u, const float* pre,
                            int64_t ld_pre, float* h_out, const int* lengths, int T, int B,
                            bool reverse, float relu_clip, void* workspace, size_t workspace_bytes,
                            cudaStream_t stream);
void persistent_rnn_backward_data(const PersistentRnnPlan& plan, const float* u, const float* h,
                                  const float* dh_from_above, int64_t ld_dh, float* dpre_out,
                                  int64_t ld_dpre, const int* lengths, int T, int B, bool reverse,
                                  float relu_clip, void* workspace, size_t workspace_bytes,
                                  cudaStream_t stream);

// plan.directions() directions in one launch (dirs[0 .. plan.directions())).
void persistent_rnn_forward(const PersistentRnnPlan& plan, const PersistentRnnDirection* dirs,
                            const int* lengths, int T, int B, float relu_clip, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream);
void persistent_rnn_backward_data(const PersistentRnnPlan& plan, const PersistentRnnDirection* dirs,
                                  const int* lengths, int T, int B, float relu_clip,
                                  void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace ds2
