// Sparse persistent RNN: the plan and calls for a pruned recurrent matrix (issue 9), beside the
// dense ones of nn/cuda/persistent_rnn.h and with their contract, except that only U's kept
// weights (the pruning mask) take part. Only the kept weights live on chip, so layers several
// times larger than the dense limit stay persistent. kernels/sparse_persistent_rnn.h has the
// kernel; nn/sparse_rnn_layout.h the host-built, bank-aware placement of the weights.
//
//   const int nnz = max_row_nonzeros(mask, H);                    // fullest row of U or U^T
//   SparsePersistentRnnPlan plan(H, /*max_batch=*/4, nnz);
//   if (!plan.fits()) std::cerr << plan.why_not() << "\n";
//   std::vector<uint32_t> fwd = plan.layout(mask, /*backward=*/false);  // upload both once per
//   std::vector<uint32_t> bwd = plan.layout(mask, /*backward=*/true);   // mask
//   PersistentRnnDirection d{u, pre, P, nullptr, h, H, false, fwd_dev};
//   sparse_persistent_rnn_forward(plan, &d, lengths, T, B, 20.0f, ws, plan.workspace_bytes(), s);
//   int h_max = SparsePersistentRnnPlan::max_hidden(4, 0.1);      // largest H at 10% density
//
// The plan picks the lanes per row and slots per thread that hold the fullest row with the
// fewest slots per CTA (the gather's work), then the first such kernel that fits one CTA per SM
// without spilling. Results are deterministic for a given mask and plan.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/precision.h"
#include "kernels/sparse_persistent_rnn.h"
#include "nn/cuda/persistent_rnn.h"
#include "nn/sparse_rnn_layout.h"

namespace ds2 {

class SparsePersistentRnnPlan {
 public:
  // `max_row_nonzeros`: kept weights in the fullest row of U or of U^T (max_row_nonzeros()).
  SparsePersistentRnnPlan(int hidden, int max_batch, int max_row_nonzeros, int directions = 1,
                          int device = -1, Precision precision = Precision::kFp32);

  bool fits() const { return fits_; }
  const std::string& why_not() const { return why_not_; }

  int hidden() const { return tiling_.hidden; }
  int max_batch() const { return tiling_.max_batch; }
  int directions() const { return tiling_.directions; }
  int max_row_nonzeros() const { return max_row_nonzeros_; }
  Precision precision() const { return tiling_.bf16_weights ? Precision::kBf16 : Precision::kFp32; }
  int device() const { return device_; }
  size_t workspace_bytes() const;
  size_t shared_bytes() const;
  int registers_per_thread() const { return registers_; }
  const kernels::SprnnTiling& tiling() const { return tiling_; }
  std::string describe() const;

  SparseRnnLayoutShape layout_shape() const;
  // The placement of U's kept weights (`mask`: U's H x H 0/1 bytes) for the forward (rows of U)
  // or backward-data (rows of U^T); throws if a row keeps more than the plan was sized for.
  std::vector<uint32_t> layout(const uint8_t* mask, bool backward,
                               SparseRnnLayoutStats* stats = nullptr) const;

  // The kept weights of the fullest row of a random mask of `hidden` at `density`, with margin:
  // the binomial mean plus 4 standard deviations (what max_hidden sizes by).
  static int expected_max_row_nonzeros(int hidden, double density);
  // The largest hidden size (a multiple of 32) whose plan fits at `density`.
  static int max_hidden(int max_batch, double density, int directions = 1, int device = -1,
                        Precision precision = Precision::kFp32);

 private:
  kernels::SprnnTiling tiling_;
  int max_row_nonzeros_ = 0;
  int device_ = 0;
  int sm_count_ = 0;
  int registers_ = 0;
  bool fits_ = false;
  std::string why_not_;
};

// Whether a layer with this sparse plan should run it rather than the dense one (`dense`: its
// plan, or null when it has none that fits): always when the dense kernel does not fit on chip
// (no plan, or one that streams rows from L2: tiling().streamed_groups), else when
// the sparse kernel's slots (padding included) are at most kSparseWorkRatio of the dense
// weights, H^2. `ds2 bench rnn --density` on an H200 (kernels/NOTES.md): sparse was faster at
// every ratio measured, 1.74x at 0.16 (H 2304, 10%), 1.12x at 0.56 and 1.03x at 0.89 (H 1152,
// 50% and 70%); 0.75 keeps a margin. A rule, not a timing, so a run and its resume choose alike.
constexpr double kSparseWorkRatio = 0.75;
double sparse_work_ratio(const SparsePersistentRnnPlan& sparse);
bool prefer_sparse(const SparsePersistentRnnPlan& sparse, const PersistentRnnPlan* dense);

// The dense calls' contract (nn/cuda/persistent_rnn.h) with each direction's `layout` set to
// the uploaded plan.layout(mask, backward) of its pass.
void sparse_persistent_rnn_forward(const SparsePersistentRnnPlan& plan,
                                   const PersistentRnnDirection* dirs, const int* lengths, int T,
                                   int B, float relu_clip, void* workspace, size_t workspace_bytes,
                                   cudaStream_t stream);
void sparse_persistent_rnn_backward_data(const SparsePersistentRnnPlan& plan,
                                         const PersistentRnnDirection* dirs, const int* lengths,
                                         int T, int B, float relu_clip, void* workspace,
                                         size_t workspace_bytes, cudaStream_t stream);

}  // namespace ds2
