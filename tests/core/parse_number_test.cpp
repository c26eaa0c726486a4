// Whole-token number parsing (core/parse_number.h), shared by the ARPA reader and the command
// line's number checks: the token is the number and nothing else.
#include "core/parse_number.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace ds2 {
namespace {

TEST(ParseNumber, DoubleTakesWholeTokensOnly) {
  double v = 0.0;
  EXPECT_TRUE(parse_double("-2.5", &v));
  EXPECT_EQ(v, -2.5);
  EXPECT_TRUE(parse_double("+1e3", &v));
  EXPECT_EQ(v, 1000.0);
  EXPECT_TRUE(parse_double("0.125", &v));
  EXPECT_EQ(v, 0.125);
  EXPECT_TRUE(parse_double("nan", &v));
  EXPECT_TRUE(std::isnan(v));
  for (const char* bad : {"", "4x", "x", "1 2", " 3", "+", "--1", "0x10"})
    EXPECT_FALSE(parse_double(bad, &v)) << "'" << bad << "'";
}

TEST(ParseNumber, Int64TakesWholeDecimalTokensOnly) {
  int64_t n = 0;
  EXPECT_TRUE(parse_int64("12", &n));
  EXPECT_EQ(n, 12);
  EXPECT_TRUE(parse_int64("-7", &n));
  EXPECT_EQ(n, -7);
  EXPECT_TRUE(parse_int64("9000000000", &n));
  EXPECT_EQ(n, int64_t{9000000000});
  for (const char* bad : {"", "12.0", "1e3", "3a", " 4", "99999999999999999999"})
    EXPECT_FALSE(parse_int64(bad, &n)) << "'" << bad << "'";
}

TEST(ParseNumber, Uint64TakesWholeUnsignedTokensOnly) {
  uint64_t n = 0;
  EXPECT_TRUE(parse_uint64("0", &n));
  EXPECT_EQ(n, 0u);
  EXPECT_TRUE(parse_uint64("18446744073709551615", &n));
  EXPECT_EQ(n, 18446744073709551615ull);
  for (const char* bad : {"", "-1", "+1", "12x", " 4", "18446744073709551616"})
    EXPECT_FALSE(parse_uint64(bad, &n)) << "'" << bad << "'";
}

}  // namespace
}  // namespace ds2
