// Where each kept recurrent weight lives in the sparse persistent RNN kernel
// (kernels/sparse_persistent_rnn.h): a host-side plan of which thread holds which nonzero in
// which register slot, built once per pruning mask and uploaded with the weights' indices.
//
//   SparseRnnLayoutShape shape{/*hidden=*/2304, /*rows_per_cta=*/18, /*ctas=*/128,
//                              /*lanes_per_row=*/16, /*slots=*/20, /*phase_lanes=*/8};
//   SparseRnnLayoutStats stats;
//   std::vector<uint32_t> words = build_sparse_rnn_layout(shape, mask, /*transpose=*/false,
//   &stats);
//
// The operator M is U (forward: row k = U[k, :]) or U^T (backward-data: row k = column k of U);
// `mask` is U's H x H row-major 0/1 mask. CTA c owns rows [c R, c R + R); thread tid of it works
// on row c R + tid / L with lane q = tid % L of the L lanes that share the row; slot s of that
// thread is words[(c * slots + s) * threads + tid]: a column index (low 16 bits) of a kept weight
// of its row, or kSparseSlotPadding | column for an empty slot (weight 0; the column repeats one
// another lane of the same bank phase reads, so the padding costs no extra shared-memory
// wavefront). Every kept weight of every row is in exactly one slot of one of its row's lanes.
//
// Bank-aware order (Zhu et al., ICLR 2018): the kernel gathers h[col] (batch_tile floats per
// column) from shared memory, `phase_lanes` = 32 / batch_tile lanes per wavefront. Lanes of one
// phase hitting different columns of the same bank group (col mod phase_lanes) serialize, so for
// each (slot, phase) the builder hands every lane a column of a bank group no other lane of the
// phase uses, taking from the row's fullest bank groups first, and counts what it could not avoid.
#pragma once

#include <cstdint>
#include <vector>

namespace ds2 {

constexpr uint32_t kSparseSlotPadding = 0x80000000u;
constexpr int kSparseMaxHidden = 1 << 16;  // columns are stored in 16 bits

struct SparseRnnLayoutShape {
  int hidden = 0;
  int rows_per_cta = 0;
  int ctas = 0;           // ctas * rows_per_cta >= hidden
  int lanes_per_row = 0;  // 8, 16 or 32
  int slots = 0;          // per thread; lanes_per_row * slots >= the fullest row's kept weights
  int phase_lanes = 8;    // lanes per shared-memory wavefront: 32 / batch_tile

  int threads() const { return rows_per_cta * lanes_per_row; }
  int64_t words() const { return int64_t{ctas} * slots * threads(); }
};

struct SparseRnnLayoutStats {
  int64_t nonzeros = 0;          // kept weights placed
  int64_t padding_slots = 0;     // slots holding no weight (rows past hidden included)
  int64_t phases = 0;            // (slot, phase) groups the kernel gathers in
  int64_t extra_wavefronts = 0;  // bank conflicts the order could not avoid
};

// Kept weights in the fullest row of U or of U^T (the larger), which sizes the slots.
int max_row_nonzeros(const uint8_t* mask, int hidden);

// Throws ds2::Error when the shape is inconsistent or a row has more kept weights than
// lanes_per_row * slots.
std::vector<uint32_t> build_sparse_rnn_layout(const SparseRnnLayoutShape& shape,
                                              const uint8_t* mask, bool transpose,
                                              SparseRnnLayoutStats* stats = nullptr);

}  // namespace ds2
