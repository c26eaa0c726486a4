// The side-by-side table the recurrence benchmarks print (`ds2 bench rnn`, also with --cell gru):
// one row per implementation with µs per timestep forward and backward-data, effective TFLOP/s,
// and the speed relative to the best reference row (cuDNN at the benchmark's precision).
//
//   std::vector<BenchRow> rows;  rows.emplace_back("ours: persistent kernel (fp32)");  ...
//   report << bench_table(rows, 2.0 * B * H * H, "2 B H^2", repeats, warmup, /*name_width=*/38);
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ds2 {

struct BenchRow {
  explicit BenchRow(std::string n) : name(std::move(n)) {}
  std::string name;
  double fwd_us = -1.0, bwd_us = -1.0;  // per timestep; < 0: not run
  std::string note;
  // Appends `more` to the note, "; " between them; an empty `more` changes nothing.
  void add_note(const std::string& more) {
    if (!more.empty()) note += (note.empty() ? "" : "; ") + more;
  }
  bool reference = false;  // a cuDNN row at the benchmark's precision: the ratio's reference
  bool sparse = false;     // ours, sparse persistent (bench rnn --density)
};

// v with `precision` digits after the point.
std::string fmt_fixed(double v, int precision);

// The table's preamble (runs, the TFLOP/s formula) and one line per row; 'x cuDNN' = the best
// reference row's time / the row's time, per column.
std::string bench_table(const std::vector<BenchRow>& rows, double flop_per_step,
                        const std::string& flop_formula, int repeats, int warmup, int name_width);

// The line after the table on a bidirectional layer's two ways (times for both directions):
// `one` the one-direction row above, `in_turn` both directions one after the other, `both` both
// in one launch (null: its plan does not fit, `plan` then says why), and which a layer runs
// (`layer_runs`, e.g. "one launch"; unused where `both` is null).
std::string both_directions_line(const BenchRow& one, const BenchRow& in_turn, const BenchRow* both,
                                 const std::string& layer_runs, const std::string& plan);

}  // namespace ds2
