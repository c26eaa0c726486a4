#include "core/utf8.h"

#include <gtest/gtest.h>

namespace ds2 {
namespace {

TEST(Utf8, ValidAndInvalidSequences) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain ascii"));
  EXPECT_TRUE(is_valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));  // é € 😀
  EXPECT_TRUE(is_valid_utf8(std::string("a\0b", 3)));
  size_t at = 99;
  EXPECT_FALSE(is_valid_utf8("ab\xff", &at));
  EXPECT_EQ(at, 2u);
  EXPECT_FALSE(is_valid_utf8("\x80"));              // stray continuation byte
  EXPECT_FALSE(is_valid_utf8("\xc3"));              // truncated
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xe0\x80\xaf"));      // overlong, 3 bytes
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // UTF-16 surrogate
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xe2\x82"));          // truncated at the end
}

TEST(Utf8, PrintableIsOneLineAndKeepsValidText) {
  EXPECT_EQ(printable("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(printable("a\nb\tc\\d\r"), "a\\nb\\tc\\\\d\\r");
  EXPECT_EQ(printable(std::string("x\0\x7f\xff", 4)), "x\\x00\\x7F\\xFF");
  EXPECT_EQ(printable("abcdef", 3), "abc...");
  EXPECT_EQ(printable("abc", 3), "abc");
}

}  // namespace
}  // namespace ds2
