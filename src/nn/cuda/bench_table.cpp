#include "nn/cuda/bench_table.h"

#include <iomanip>
#include <sstream>

namespace ds2 {

std::string fmt_fixed(double v, int precision) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << v;
  return s.str();
}

std::string bench_table(const std::vector<BenchRow>& rows, double flop_per_step,
                        const std::string& flop_formula, int repeats, int warmup, int name_width) {
  double best_fwd = -1.0, best_bwd = -1.0;
  for (const BenchRow& r : rows) {
    if (!r.reference) continue;
    if (r.fwd_us > 0 && (best_fwd < 0 || r.fwd_us < best_fwd)) best_fwd = r.fwd_us;
    if (r.bwd_us > 0 && (best_bwd < 0 || r.bwd_us < best_bwd)) best_bwd = r.bwd_us;
  }
  std::ostringstream rep;
  rep << "median of " << repeats << " runs after " << warmup
      << " warm-up runs; TFLOP/s = " << flop_formula
      << " / time per step; 'x cuDNN' = best reference cuDNN time / this time "
      << "(> 1: faster)\n\n";
  rep << std::left << std::setw(name_width) << "implementation" << std::right << std::setw(12)
      << "fwd us/step" << std::setw(9) << "TFLOP/s" << std::setw(9) << "x cuDNN" << std::setw(12)
      << "bwd us/step" << std::setw(9) << "TFLOP/s" << std::setw(9) << "x cuDNN"
      << "  notes\n";
  auto cell = [&](double us, double best) {
    std::ostringstream s;
    if (us < 0) {
      s << std::setw(12) << "-" << std::setw(9) << "-" << std::setw(9) << "-";
    } else {
      s << std::setw(12) << fmt_fixed(us, 2) << std::setw(9)
        << fmt_fixed(flop_per_step / (us * 1e6), 2) << std::setw(9)
        << (best > 0 ? fmt_fixed(best / us, 2) + "x" : std::string("-"));
    }
    return s.str();
  };
  for (const BenchRow& r : rows)
    rep << std::left << std::setw(name_width) << r.name << std::right << cell(r.fwd_us, best_fwd)
        << cell(r.bwd_us, best_bwd) << "  " << r.note << "\n";
  return rep.str();
}

std::string both_directions_line(const BenchRow& one, const BenchRow& in_turn, const BenchRow* both,
                                 const std::string& layer_runs, const std::string& plan) {
  std::ostringstream line;
  line << "both directions, us per step for both, forward / backward-data (one direction above: "
       << fmt_fixed(one.fwd_us, 2) << " / " << fmt_fixed(one.bwd_us, 2) << "): one after the other "
       << fmt_fixed(in_turn.fwd_us, 2) << " / " << fmt_fixed(in_turn.bwd_us, 2)
       << ", in one launch ";
  if (both)
    line << fmt_fixed(both->fwd_us, 2) << " / " << fmt_fixed(both->bwd_us, 2) << "; a layer runs "
         << layer_runs << "; two-direction plan: " << plan << "\n";
  else
    line << "does not fit (" << plan << "); a layer runs one after the other\n";
  return line.str();
}

}  // namespace ds2
