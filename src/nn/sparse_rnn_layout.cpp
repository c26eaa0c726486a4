#include "nn/sparse_rnn_layout.h"

#include <algorithm>
#include <array>

#include "core/error.h"

namespace ds2 {
namespace {

// The kept columns of one row of M, split by bank group (col mod phase_lanes), each ascending;
// handed out from the front.
class RowBuckets {
 public:
  void reset(const uint8_t* mask, int hidden, int row, bool transpose, int phase_lanes) {
    buckets_.assign(phase_lanes, {});
    next_.assign(phase_lanes, 0);
    remaining_ = 0;
    if (row >= hidden) return;
    for (int col = 0; col < hidden; ++col) {
      const uint8_t kept =
          transpose ? mask[int64_t{col} * hidden + row] : mask[int64_t{row} * hidden + col];
      if (kept == 0) continue;
      buckets_[col % phase_lanes].push_back(col);
      ++remaining_;
    }
  }
  int remaining() const { return remaining_; }
  int left_in(int bank) const { return static_cast<int>(buckets_[bank].size()) - next_[bank]; }
  int take(int bank) {
    --remaining_;
    return buckets_[bank][next_[bank]++];
  }
  // The bank group with the most columns left, among those `allowed` (-1 when none has any).
  template <typename Allowed>
  int fullest(Allowed allowed) const {
    int best = -1;
    for (int b = 0; b < static_cast<int>(buckets_.size()); ++b)
      if (left_in(b) > 0 && allowed(b) && (best < 0 || left_in(b) > left_in(best))) best = b;
    return best;
  }

 private:
  std::vector<std::vector<int>> buckets_;
  std::vector<int> next_;
  int remaining_ = 0;
};

void check_shape(const SparseRnnLayoutShape& s) {
  const bool lanes_ok = s.lanes_per_row == 8 || s.lanes_per_row == 16 || s.lanes_per_row == 32;
  const bool phase_ok = s.phase_lanes == 8 || s.phase_lanes == 16 || s.phase_lanes == 32;
  DS2_CHECK(s.hidden > 0 && s.hidden <= kSparseMaxHidden && s.rows_per_cta > 0 && s.ctas > 0 &&
                int64_t{s.ctas} * s.rows_per_cta >= s.hidden && lanes_ok && phase_ok &&
                s.slots > 0 && s.threads() % 32 == 0,
            "sparse RNN layout: invalid shape (hidden "
                << s.hidden << ", rows/CTA " << s.rows_per_cta << ", CTAs " << s.ctas
                << ", lanes/row " << s.lanes_per_row << ", slots " << s.slots << ", phase lanes "
                << s.phase_lanes << ")");
}

}  // namespace

int max_row_nonzeros(const uint8_t* mask, int hidden) {
  std::vector<int> rows(hidden, 0), cols(hidden, 0);
  for (int r = 0; r < hidden; ++r)
    for (int c = 0; c < hidden; ++c)
      if (mask[int64_t{r} * hidden + c] != 0) {
        ++rows[r];
        ++cols[c];
      }
  int best = 0;
  for (int i = 0; i < hidden; ++i) best = std::max({best, rows[i], cols[i]});
  return best;
}

std::vector<uint32_t> build_sparse_rnn_layout(const SparseRnnLayoutShape& shape,
                                              const uint8_t* mask, bool transpose,
                                              SparseRnnLayoutStats* stats) {
  check_shape(shape);
  const int H = shape.hidden, L = shape.lanes_per_row, S = shape.slots, P = shape.phase_lanes;
  const int nt = shape.threads(), rows_per_warp = 32 / L;
  std::vector<uint32_t> words(static_cast<size_t>(shape.words()));
  SparseRnnLayoutStats st;
  std::array<RowBuckets, 4> rows;  // the rows of one warp (32 / L <= 4)
  std::vector<int> col(P);
  std::vector<char> pad(P), used(P);
  std::vector<int> per_bank(P);

  for (int c = 0; c < shape.ctas; ++c) {
    for (int warp = 0; warp < nt / 32; ++warp) {
      const int first_row = c * shape.rows_per_cta + warp * rows_per_warp;
      for (int i = 0; i < rows_per_warp; ++i) {
        rows[i].reset(mask, H, first_row + i, transpose, P);
        DS2_CHECK(rows[i].remaining() <= L * S,
                  "sparse RNN layout: row " << first_row + i << " of " << (transpose ? "U^T" : "U")
                                            << " keeps " << rows[i].remaining()
                                            << " weights, more than the " << L << " x " << S
                                            << " slots the plan sized");
      }
      for (int s = 0; s < S; ++s) {
        for (int p0 = 0; p0 < 32; p0 += P) {
          std::fill(used.begin(), used.end(), 0);
          int shared_col = -1;  // what padding lanes read: a column this phase already reads
          for (int j = 0; j < P; ++j) {
            const int lane = p0 + j;
            RowBuckets& row = rows[lane / L];
            // Slots this row still has from here on (its lanes are contiguous in the warp).
            const int positions_left = L * (S - s) - lane % L;
            int bank = row.fullest([&](int b) { return used[b] == 0; });
            if (bank < 0 && row.remaining() > 0 && row.remaining() >= positions_left)
              bank = row.fullest([](int) { return true; });  // no room to wait: a conflict
            pad[j] = bank < 0;
            if (bank < 0) continue;
            col[j] = row.take(bank);
            used[bank] = 1;
            if (shared_col < 0) shared_col = col[j];
          }
          // Wavefronts of this phase: the most distinct columns that share one bank group.
          std::fill(per_bank.begin(), per_bank.end(), 0);
          for (int j = 0; j < P; ++j) {
            if (pad[j]) col[j] = shared_col < 0 ? 0 : shared_col;
            bool repeat = false;  // the same address as an earlier lane: a broadcast, free
            for (int i = 0; i < j && !repeat; ++i) repeat = col[i] == col[j];
            if (!repeat) ++per_bank[col[j] % P];
            const size_t index = (size_t(c) * S + s) * nt + warp * 32 + p0 + j;
            words[index] = static_cast<uint32_t>(col[j]) | (pad[j] ? kSparseSlotPadding : 0u);
            st.padding_slots += pad[j] ? 1 : 0;
            st.nonzeros += pad[j] ? 0 : 1;
          }
          const int wavefronts = *std::max_element(per_bank.begin(), per_bank.end());
          st.extra_wavefronts += wavefronts - 1;
          ++st.phases;
        }
      }
      for (int i = 0; i < rows_per_warp; ++i)
        DS2_CHECK(rows[i].remaining() == 0, "sparse RNN layout: internal error, row "
                                                << first_row + i << " has weights left");
    }
  }
  if (stats) *stats = st;
  return words;
}

}  // namespace ds2
