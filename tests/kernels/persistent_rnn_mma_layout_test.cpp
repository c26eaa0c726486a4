// The fp32 split's state exchange layout (kernels/persistent_rnn_mma.h), on the host: where the
// owner of batch row b and element k writes its hi and lo halves (prnn_split_state_half) must be
// where the reader expects them. A warp w reads pieces [w ppw, w ppw + ppw), piece p holding its
// k-tiles 2p (words .x, .y) and 2p + 1 (.z, .w); lane 4 g + q takes B-fragment rows 2q, 2q + 1
// (its first word of a k-tile) and 2q + 8, 2q + 9 (the second) of column g, hi halves in columns
// 0-3 and lo halves in 4-7. Every place is written once and lies inside one parity of the
// exchange, for every hidden size the kernels take. And the host's layout decisions (which U
// fragments sit in shared memory) are those of the kernel that runs the plan, which makes them at
// compile time from its k-tiles per warp (prnn_mma_kernel_k_tiles), not from the plan's. And a
// launch refuses a tiling whose CTAs leave a state element of the padded k-tiles without an owner.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/persistent_rnn_mma.h"
#include "support/mma_tiling.h"

namespace ds2::kernels {
namespace {

struct ReaderView {
  int k_tile, row, column;  // what the reader multiplies at this place
  int warp_k_tile;          // the k-tile's place in the reading warp's share
};

// The reader's side of a 16-bit place, decoded from the layout the kernel's loads and its
// fragment selection assume.
ReaderView reader_view(int half_index, int kpw) {
  const int piece = half_index / 256, lane = half_index / 8 % 32, word = half_index / 2 % 4;
  const int warp = piece / prnn_split_pieces_per_warp(kpw);
  const int p = piece % prnn_split_pieces_per_warp(kpw);
  const int warp_k_tile = 2 * p + word / 2;
  const int row = 8 * (word % 2) + 2 * (lane % 4) + half_index % 2;
  return {warp * kpw + warp_k_tile, row, lane / 4, warp_k_tile};
}

TEST(PersistentRnnSplitLayout, EveryHalfSitsWhereItsReaderTakesIt) {
  int checked = 0;
  for (int H = 1; H <= 3200; H += (H < 64 ? 1 : 13)) {
    const int k_tiles = prnn_mma_k_tiles(H), kpw = prnn_mma_k_tiles_per_warp(H);
    const int parity_halves = k_tiles * 32 * 4 * 2;  // one n-tile of 32-bit words, in halves
    std::vector<char> written(parity_halves, 0);
    for (int b = 0; b < 4; ++b)
      for (int k = 0; k < 16 * k_tiles; ++k)
        for (const bool lo : {false, true}) {
          const int at = prnn_split_state_half(b, k, kpw) + (lo ? kPrnnSplitLoHalves : 0);
          ASSERT_GE(at, 0) << "H " << H;
          ASSERT_LT(at, parity_halves) << "H " << H << ", b " << b << ", k " << k;
          ASSERT_EQ(written[at], 0) << "H " << H << ": two values at " << at;
          written[at] = 1;
          const ReaderView v = reader_view(at, kpw);
          ASSERT_EQ(v.k_tile, k / 16) << "H " << H << ", b " << b << ", k " << k;
          ASSERT_EQ(v.row, k % 16) << "H " << H << ", b " << b << ", k " << k;
          ASSERT_EQ(v.column, b + (lo ? 4 : 0)) << "H " << H << ", b " << b << ", k " << k;
          // the reading warp holds this k-tile's weights (its share is kpw k-tiles)
          ASSERT_LT(v.warp_k_tile, kpw) << "H " << H << ", b " << b << ", k " << k;
          ++checked;
        }
  }
  EXPECT_GT(checked, 1000000);
}

// An fp32 split tiling (16-row m-tiles) of `hidden` rows, `m_tiles` m-tiles a CTA.
PrnnTiling split_tiling(int hidden, int m_tiles) {
  PrnnTiling t;
  t.hidden = hidden;
  t.max_batch = 4;
  t.directions = 1;
  t.tensor_cores = true;
  t.threads = kPrnnMmaThreads;
  t.rows_per_cta = 16 * m_tiles;
  t.ctas_per_direction = (hidden + t.rows_per_cta - 1) / t.rows_per_cta;
  t.register_groups = t.rows_per_cta / kPrnnRowGroup;
  t.batch_tile = 4;
  t.tagged_exchange = true;
  return t;
}

// Plans whose k-tiles per warp round up to the same kernel share its fragment placement: the
// host sizes shared memory from the same rule the kernel was compiled with. (Session 46's rule
// for lo at two m-tiles differed between 3 and 4 k-tiles per warp, both run by the 4-k-tile
// kernel, which then wrote lo past the shared memory the plan had sized.)
TEST(PersistentRnnSplitLayout, SharedMemoryFollowsTheKernelNotThePlansKTiles) {
  int checked = 0;
  for (int m_tiles = 1; m_tiles <= 2; ++m_tiles)
    for (int H = 1; H <= 16 * kPrnnMmaWarps * 12; ++H) {
      const int kpw = prnn_mma_k_tiles_per_warp(H), kernel_kpw = prnn_mma_kernel_k_tiles(kpw);
      ASSERT_GE(kernel_kpw, kpw) << "H " << H;
      // The largest hidden size the same kernel runs with all its k-tiles.
      const int full_H = 16 * kPrnnMmaWarps * kernel_kpw;
      ASSERT_EQ(prnn_mma_kernel_k_tiles(prnn_mma_k_tiles_per_warp(full_H)), kernel_kpw);
      const PrnnTiling t = split_tiling(H, m_tiles), full = split_tiling(full_H, m_tiles);
      ASSERT_TRUE(prnn_mma_half_split(t) && !prnn_mma_stacked_split(t));
      EXPECT_EQ(prnn_mma_lo_in_shared(t), prnn_mma_lo_in_shared(full))
          << "H " << H << ", " << m_tiles << " m-tiles: lo, kpw " << kpw << " against "
          << kernel_kpw;
      EXPECT_EQ(prnn_mma_hi_in_shared(t), prnn_mma_hi_in_shared(full))
          << "H " << H << ", " << m_tiles << " m-tiles: hi, kpw " << kpw << " against "
          << kernel_kpw;
      ++checked;
    }
  EXPECT_EQ(checked, 2 * 16 * kPrnnMmaWarps * 12);
}

// What a launch that must stop before it reaches the GPU says ("" if it threw nothing: it ran).
template <class Launch>
std::string launch_refusal(Launch launch) {
  try {
    launch();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
bool says(const std::string& why, const char* what) {
  return why.find(what) != std::string::npos;
}

// Every state element of the padded k-tiles needs an owning CTA: a tagged reader waits for its
// tag. H 2136 in 89 stacked CTAs of 24 rows leaves rows 2136-2143 of k-tile 133 unowned (the
// plan takes 90 CTAs since session 47; before, that launch hung). A launch of such a tiling is
// refused before it reaches the GPU, naming the reason.
TEST(PersistentRnnSplitLayout, ALaunchRefusesStateElementsWithoutAnOwner) {
  const PrnnTiling t = tagged_mma_tiling(2136, 4, 24, 89);
  ASSERT_TRUE(prnn_mma_stacked_split(t));
  ASSERT_EQ(prnn_mma_padded_rows(t.hidden), 2144);  // 134 k-tiles
  ASSERT_LT(t.ctas_per_direction * t.rows_per_cta, prnn_mma_padded_rows(t.hidden));
  const int length = 1;
  const std::string why = launch_refusal(
      [&] { prnn_launch(t, false, nullptr, &length, 1, 1, 1.0f, nullptr, nullptr); });
  EXPECT_TRUE(says(why, "without an owner")) << (why.empty() ? "an uncovered tiling ran" : why);
}

// The GRU forward's owners are neurons, a third of its rows: H 1024 on 127 stacked CTAs of 24
// rows has rows enough (3048) but 1016 neurons for 1024 state elements. Its launch is refused by
// the same rule, before it reaches the GPU.
TEST(PersistentRnnSplitLayout, AGruLaunchCountsNeuronsAsOwners) {
  PrnnTiling t = tagged_mma_tiling(1024, 1, 24, 127);
  t.gru = true;
  ASSERT_NE(prnn_mma_kernel(t), nullptr);
  ASSERT_GE(t.ctas_per_direction * t.rows_per_cta, prnn_mma_padded_rows(t.hidden));
  ASSERT_LT(t.ctas_per_direction * pgru_mma_neurons(t), prnn_mma_padded_rows(t.hidden));
  const int length = 1;
  auto launch = [&] { pgru_mma_forward_launch(t, nullptr, &length, 1, 1, nullptr, nullptr); };
  const std::string uncovered = launch_refusal(launch);
  EXPECT_TRUE(says(uncovered, "without an owner")) << "uncovered GRU tiling: " << uncovered;
  t.ctas_per_direction = 128;  // 1024 neurons: passes the rule, then stops at the null workspace
  const std::string covered = launch_refusal(launch);
  EXPECT_FALSE(says(covered, "without an owner")) << covered;
  EXPECT_TRUE(says(covered, "null workspace")) << "a launch without a workspace: " << covered;
}

// The GRU's backward-data reads 3H state elements padded to whole k-tiles, and neurons past H
// own the padded tail: H 1000 (3000 elements in 188 k-tiles, 8 of tail) needs 1008 owners. On 125
// stacked CTAs of 8 neurons it has a row for every neuron (1000) but not for the tail, and its
// launch is refused by the coverage rule. H 997 (2991 elements, 1 of tail) needs 998, not H
// padded to k-tiles (1008): on the same 125 CTAs it passes the rule, then stops at the null
// workspace.
TEST(PersistentRnnSplitLayout, AGruBackwardLaunchCountsThePaddedTail) {
  PrnnTiling t = tagged_mma_tiling(1000, 4, 8, 125);
  t.gru = true;
  t.gru_backward = true;
  t.stacked_split = true;
  ASSERT_NE(prnn_mma_kernel(t), nullptr);
  ASSERT_EQ(t.inputs(), 3000);
  ASSERT_EQ(prnn_mma_state_owners(t), 1008);
  ASSERT_GE(t.ctas_per_direction * pgru_mma_neurons(t), t.hidden);
  const int length = 1;
  auto launch = [&] { pgru_mma_backward_launch(t, nullptr, &length, 1, 1, nullptr, nullptr); };
  const std::string no_tail = launch_refusal(launch);
  EXPECT_TRUE(says(no_tail, "without an owner")) << "the tail unowned: " << no_tail;
  t.hidden = 997;
  ASSERT_EQ(prnn_mma_state_owners(t), 998);
  ASSERT_LT(t.ctas_per_direction * pgru_mma_neurons(t), prnn_mma_padded_rows(t.hidden));
  const std::string covered = launch_refusal(launch);
  EXPECT_FALSE(says(covered, "without an owner")) << covered;
  EXPECT_TRUE(says(covered, "null workspace")) << "a launch without a workspace: " << covered;
}

// Past batch 4 the fp32 split runs in batch groups of at most 4 rows, a set of CTAs each with an
// exchange of its own (up to kPrnnMaxSets sets, the GRU's too; bf16 up to kPrnnMaxBf16Sets). H 1152
// at batch 8 in 2 groups of 48 stacked CTAs: a kernel (each set's batch is 4), twice one set's
// exchange, and a launch that passes the tiling check (then stops at the null workspace). In one
// group the same batch has no kernel, and 9 sets (clipped ReLU or GRU) or bf16 past 4 sets are
// refused.
TEST(PersistentRnnSplitLayout, BatchGroupsRunTheSplitFourRowsASet) {
  PrnnTiling one = tagged_mma_tiling(1152, 4, 24, 48);
  one.batch_tile = 4;
  PrnnTiling two = one;
  two.max_batch = 8;
  two.batch_groups = 2;
  ASSERT_EQ(two.group_batch(), 4);
  ASSERT_NE(prnn_mma_kernel(two), nullptr);
  EXPECT_EQ(prnn_mma_kernel(two), prnn_mma_kernel(one));
  EXPECT_GT(prnn_mma_workspace_bytes(two), prnn_mma_workspace_bytes(one));
  const int lengths[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  auto launch = [&](const PrnnTiling& t) {
    return launch_refusal(
        [&] { prnn_launch(t, false, nullptr, lengths, 1, 8, 1.0f, nullptr, nullptr); });
  };
  const std::string ran = launch(two);
  EXPECT_TRUE(says(ran, "null workspace")) << "2 groups of 4 rows: " << ran;
  PrnnTiling whole = two;
  whole.batch_groups = 1;  // 8 rows a set: no split kernel
  EXPECT_EQ(prnn_mma_kernel(whole), nullptr);
  EXPECT_TRUE(says(launch(whole), "invalid tiling"));
  PrnnTiling nine = two;
  nine.max_batch = 36;
  nine.batch_groups = 9;
  ASSERT_EQ(nine.group_batch(), 4);
  EXPECT_TRUE(says(launch(nine), "invalid tiling")) << "9 sets";
  // bf16 (16-row tiles, passes of 8): 4 sets run, 5 do not.
  PrnnTiling bf16 = tagged_mma_tiling(1152, 32, 16, 72);
  bf16.bf16_weights = true;
  bf16.batch_tile = 8;
  bf16.batch_groups = 4;
  EXPECT_TRUE(says(launch(bf16), "null workspace")) << "4 bf16 sets: " << launch(bf16);
  bf16.max_batch = 40;
  bf16.batch_groups = 5;
  EXPECT_TRUE(says(launch(bf16), "invalid tiling")) << "5 bf16 sets";
  // The GRU forward (8 neurons a CTA, 144 CTAs own every state element): one group runs, and two
  // (a set's arrays start at its first row in the kernel), not 9 sets.
  PrnnTiling gru = tagged_mma_tiling(1152, 4, 24, 144);
  gru.gru = true;
  const auto gru_launch = [&](const PrnnTiling& t) {
    return launch_refusal(
        [&] { pgru_mma_forward_launch(t, nullptr, lengths, 1, 4, nullptr, nullptr); });
  };
  EXPECT_TRUE(says(gru_launch(gru), "null workspace")) << "one GRU group: " << gru_launch(gru);
  gru.max_batch = 8;
  gru.batch_groups = 2;
  EXPECT_TRUE(says(gru_launch(gru), "null workspace")) << "2 GRU groups: " << gru_launch(gru);
  gru.max_batch = 36;
  gru.batch_groups = 9;
  EXPECT_TRUE(says(gru_launch(gru), "invalid tiling")) << "9 GRU sets";
}

}  // namespace
}  // namespace ds2::kernels
