// The command line's number checks (cli/number_validators.h): what passes, and messages that name
// the value instead of CLI11's range up to the largest double.
#include "cli/number_validators.h"

#include <gtest/gtest.h>

#include <string>

namespace ds2::cli {
namespace {

std::string check(const CLI::Validator& v, std::string text) {
  return v(text);
}

TEST(NumberValidators, PositiveAcceptsPositiveNumbersOnly) {
  for (const char* ok : {"1", "4", "0.5", "1e3", "256"}) EXPECT_EQ(check(kPositive, ok), "") << ok;
  EXPECT_EQ(check(kPositive, "0"), "must be a positive number, got '0'");
  EXPECT_EQ(check(kPositive, "-3"), "must be a positive number, got '-3'");
  EXPECT_EQ(check(kPositive, "x"), "must be a positive number, got 'x'");
  EXPECT_EQ(check(kPositive, "4x"), "must be a positive number, got '4x'");
  EXPECT_EQ(check(kPositive, ""), "must be a positive number, got ''");
  EXPECT_EQ(check(kPositive, "nan"), "must be a positive number, got 'nan'");
}

TEST(NumberValidators, NonNegativeAcceptsZero) {
  for (const char* ok : {"0", "3", "0.25"}) EXPECT_EQ(check(kNonNegative, ok), "") << ok;
  EXPECT_EQ(check(kNonNegative, "-1"), "must be zero or more, got '-1'");
  EXPECT_EQ(check(kNonNegative, "two"), "must be zero or more, got 'two'");
}

TEST(NumberValidators, AnOptionReportsItsNameAndValue) {
  CLI::App app;
  int hidden = 0;
  app.add_option("--hidden", hidden)->check(kPositive);
  try {
    app.parse(std::string("--hidden 0"), false);
    FAIL() << "parsed --hidden 0";
  } catch (const CLI::ValidationError& e) {
    EXPECT_EQ(std::string(e.what()), "--hidden: must be a positive number, got '0'");
  }
  app.parse(std::string("--hidden 12"), false);
  EXPECT_EQ(hidden, 12);
}

}  // namespace
}  // namespace ds2::cli
