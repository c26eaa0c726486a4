// bench_table (nn/cuda/bench_table.h): the ratio column is the best reference row's time over the
// row's, per column, from reference rows only; rows that did not run print dashes. Host code only:
// runs without a GPU.
#include "nn/cuda/bench_table.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace ds2 {
namespace {

std::string line_of(const std::string& table, const std::string& start) {
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(start, 0) == 0) return line;
  return "";
}

TEST(BenchTable, RatiosAgainstTheBestReferenceRowPerColumn) {
  std::vector<BenchRow> rows;
  rows.emplace_back("ours");
  rows.back().fwd_us = 2.0;
  rows.back().bwd_us = 4.0;
  rows.emplace_back("ref a");
  rows.back().fwd_us = 3.0;
  rows.back().bwd_us = 10.0;
  rows.back().reference = true;
  rows.emplace_back("ref b");
  rows.back().fwd_us = 5.0;
  rows.back().bwd_us = 8.0;
  rows.back().reference = true;
  rows.emplace_back("other");  // not a reference: faster, but not the yardstick
  rows.back().fwd_us = 1.0;
  rows.back().bwd_us = 1.0;
  rows.emplace_back("refused");
  rows.back().note = "n/a: not supported";
  // 2 * 4 * 1000^2 flop a step: 8e6 / (2 us) = 4 TFLOP/s.
  const std::string t = bench_table(rows, 8e6, "2 B H^2", 20, 3, 10);
  EXPECT_NE(t.find("median of 20 runs after 3 warm-up runs; TFLOP/s = 2 B H^2"), std::string::npos)
      << t;
  const std::string ours = line_of(t, "ours");
  // Forward: best reference 3.0 (ref a); backward: 8.0 (ref b).
  EXPECT_NE(ours.find("2.00     4.00    1.50x"), std::string::npos) << ours;
  EXPECT_NE(ours.find("4.00     2.00    2.00x"), std::string::npos) << ours;
  EXPECT_NE(line_of(t, "ref b").find("0.60x"), std::string::npos) << t;
  EXPECT_NE(line_of(t, "other").find("3.00x"), std::string::npos) << t;
  const std::string refused = line_of(t, "refused");
  EXPECT_NE(refused.find("-        -        -"), std::string::npos) << refused;
  EXPECT_NE(refused.find("n/a: not supported"), std::string::npos) << refused;
}

TEST(BenchTable, NoReferenceRowsPrintNoRatios) {
  std::vector<BenchRow> rows;
  rows.emplace_back("ours");
  rows.back().fwd_us = 2.0;
  rows.back().bwd_us = 2.0;
  const std::string ours = line_of(bench_table(rows, 8e6, "f", 1, 0, 10), "ours");
  EXPECT_NE(ours.find("2.00     4.00        -"), std::string::npos) << ours;
  EXPECT_EQ(fmt_fixed(1.005, 1), "1.0");
  EXPECT_EQ(fmt_fixed(2.5, 2), "2.50");
}

}  // namespace
}  // namespace ds2
