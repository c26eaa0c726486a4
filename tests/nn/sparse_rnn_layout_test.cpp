// The sparse persistent kernel's weight placement (nn/sparse_rnn_layout.h): every kept weight in
// exactly one slot of its own row's lanes, padding flagged, U^T's layout equal to the layout of
// the transposed mask, errors for rows too full for the slots, and the bank-aware order costing
// far fewer shared-memory wavefronts than handing out columns in ascending order.
#include "nn/sparse_rnn_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/rng.h"

namespace ds2 {
namespace {

std::vector<uint8_t> random_mask(int H, double density, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> mask(int64_t{H} * H);
  for (auto& m : mask) m = rng.uniform(0.0f, 1.0f) < density ? 1 : 0;
  return mask;
}

SparseRnnLayoutShape shape_for(int H, int rows, int lanes, int slots, int phase_lanes) {
  SparseRnnLayoutShape s;
  s.hidden = H;
  s.rows_per_cta = rows;
  s.ctas = (H + rows - 1) / rows;
  s.lanes_per_row = lanes;
  s.slots = slots;
  s.phase_lanes = phase_lanes;
  return s;
}

// Checks the placement and returns how many kept weights it holds.
int64_t check_placement(const SparseRnnLayoutShape& shape, const std::vector<uint8_t>& mask,
                        bool transpose, const std::vector<uint32_t>& words) {
  const int H = shape.hidden, nt = shape.threads();
  EXPECT_EQ(static_cast<int64_t>(words.size()), shape.words());
  std::vector<uint8_t> seen(mask.size(), 0);
  int64_t placed = 0;
  for (int c = 0; c < shape.ctas; ++c)
    for (int s = 0; s < shape.slots; ++s)
      for (int tid = 0; tid < nt; ++tid) {
        const uint32_t w = words[(size_t(c) * shape.slots + s) * nt + tid];
        const int row = c * shape.rows_per_cta + tid / shape.lanes_per_row;
        const int col = static_cast<int>(w & 0xFFFFu);
        EXPECT_LT(col, H);
        if (w & kSparseSlotPadding) continue;
        EXPECT_LT(row, H);
        const int64_t at = transpose ? int64_t{col} * H + row : int64_t{row} * H + col;
        EXPECT_EQ(mask[at], 1) << "slot holds a pruned weight: row " << row << " col " << col;
        EXPECT_EQ(seen[at], 0) << "weight placed twice: row " << row << " col " << col;
        seen[at] = 1;
        ++placed;
      }
  EXPECT_EQ(seen, mask) << "some kept weight has no slot";
  return placed;
}

TEST(SparseRnnLayout, PlacesEveryKeptWeightOnceInItsRow) {
  for (const double density : {0.05, 0.1, 0.3, 0.5}) {
    for (const int phase : {8, 32}) {
      SCOPED_TRACE(::testing::Message() << "density " << density << ", phase lanes " << phase);
      const int H = 203;  // not a multiple of anything: the last CTA has rows past H
      const std::vector<uint8_t> mask = random_mask(H, density, 7);
      const int fullest = max_row_nonzeros(mask.data(), H);
      for (const int lanes : {8, 16, 32}) {
        const int slots = (fullest + lanes - 1) / lanes;
        const SparseRnnLayoutShape shape = shape_for(H, 4, lanes, slots, phase);
        for (const bool transpose : {false, true}) {
          SparseRnnLayoutStats st;
          const auto words = build_sparse_rnn_layout(shape, mask.data(), transpose, &st);
          const int64_t placed = check_placement(shape, mask, transpose, words);
          EXPECT_EQ(st.nonzeros, placed);
          EXPECT_EQ(st.nonzeros + st.padding_slots, shape.words());
        }
      }
    }
  }
}

TEST(SparseRnnLayout, TransposeIsTheLayoutOfTheTransposedMask) {
  const int H = 96;
  const std::vector<uint8_t> mask = random_mask(H, 0.2, 11);
  std::vector<uint8_t> mt(mask.size());
  for (int r = 0; r < H; ++r)
    for (int c = 0; c < H; ++c) mt[int64_t{c} * H + r] = mask[int64_t{r} * H + c];
  const SparseRnnLayoutShape shape = shape_for(H, 2, 16, 4, 8);
  EXPECT_EQ(build_sparse_rnn_layout(shape, mask.data(), true),
            build_sparse_rnn_layout(shape, mt.data(), false));
}

TEST(SparseRnnLayout, MaxRowNonzerosCountsRowsAndColumns) {
  const int H = 5;
  std::vector<uint8_t> mask(H * H, 0);
  for (int r = 0; r < H; ++r) mask[r * H + 2] = 1;  // column 2 full: 5 in U^T's row 2
  mask[0] = mask[1] = 1;                            // row 0: 3
  EXPECT_EQ(max_row_nonzeros(mask.data(), H), 5);
}

TEST(SparseRnnLayout, BankAwareOrderAvoidsConflicts) {
  // The DS2-sized case the bench runs: H = 2304 at 10%, batch tile 4 (8 lanes per wavefront).
  const int H = 2304;
  const std::vector<uint8_t> mask = random_mask(H, 0.1, 3);
  const int fullest = max_row_nonzeros(mask.data(), H);
  const SparseRnnLayoutShape shape = shape_for(H, 18, 16, (fullest + 15) / 16, 8);
  SparseRnnLayoutStats st;
  build_sparse_rnn_layout(shape, mask.data(), false, &st);
  // Ascending columns, lane after lane (what a plain CSR split would do), for comparison.
  int64_t naive_extra = 0;
  for (int row = 0; row < H; ++row) {
    std::vector<int> cols;
    for (int c = 0; c < H; ++c)
      if (mask[int64_t{row} * H + c]) cols.push_back(c);
    cols.resize(size_t(shape.lanes_per_row) * shape.slots, -1);
    for (int s = 0; s < shape.slots; ++s)
      for (int q0 = 0; q0 < shape.lanes_per_row; q0 += 8) {
        int per_bank[8] = {0};
        for (int j = 0; j < 8; ++j) {
          const int col = cols[size_t(q0 + j) * shape.slots + s];
          if (col >= 0) ++per_bank[col % 8];
        }
        naive_extra += std::max(1, *std::max_element(per_bank, per_bank + 8)) - 1;
      }
  }
  std::cout << "H 2304 at 10%: " << st.phases << " wavefront phases, " << st.extra_wavefronts
            << " extra wavefronts bank-aware vs " << naive_extra << " in column order\n";
  EXPECT_LT(st.extra_wavefronts * 20, naive_extra);
  EXPECT_LT(st.extra_wavefronts, st.phases / 20);  // measured: 3.9%
}

TEST(SparseRnnLayout, RefusesRowsFullerThanTheSlotsAndBadShapes) {
  const int H = 64;
  const std::vector<uint8_t> mask(int64_t{H} * H, 1);
  try {
    build_sparse_rnn_layout(shape_for(H, 4, 8, 7, 8), mask.data(), false);
    FAIL() << "no error for 64 weights in 8 x 7 slots";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 0 of U keeps 64 weights"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(build_sparse_rnn_layout(shape_for(H, 4, 12, 8, 8), mask.data(), false), Error);
  EXPECT_THROW(build_sparse_rnn_layout(shape_for(H, 1, 8, 8, 8), mask.data(), false), Error);
}

}  // namespace
}  // namespace ds2
