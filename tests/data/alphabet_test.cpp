#include "data/alphabet.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace ds2 {
namespace {

namespace fs = std::filesystem;

std::string spell(const std::string& raw) {
  return normalize_text(raw, TextNormalization{});
}

TEST(Alphabet, EnglishHasSpaceApostropheAndLettersAfterBlank) {
  const Alphabet alphabet = Alphabet::english();
  EXPECT_EQ(alphabet.size(), 28);
  EXPECT_EQ(alphabet.num_classes(), 29);
  EXPECT_EQ(alphabet.symbol(1), " ");
  EXPECT_EQ(alphabet.symbol(2), "'");
  EXPECT_EQ(alphabet.symbol(3), "a");
  EXPECT_EQ(alphabet.symbol(28), "z");
  EXPECT_THROW(alphabet.symbol(0), Error);
  EXPECT_THROW(alphabet.symbol(29), Error);
}

TEST(Alphabet, EncodeDecodeRoundTrip) {
  const Alphabet alphabet = Alphabet::english();
  std::string bad;
  const std::vector<int> classes = alphabet.encode("a b'z", &bad);
  EXPECT_EQ(bad, "");
  EXPECT_EQ(classes, (std::vector<int>{3, 1, 4, 2, 28}));
  EXPECT_EQ(alphabet.decode(classes), "a b'z");

  const std::string sentence = "the quick brown fox jumps over the lazy dog's back";
  EXPECT_EQ(alphabet.decode(alphabet.encode(sentence, nullptr)), sentence);
}

TEST(Alphabet, DecodeSkipsBlanksKeepsRepeatsAndRejectsOutOfRange) {
  const Alphabet alphabet = Alphabet::english();
  EXPECT_EQ(alphabet.decode({0, 3, 0, 3, 3, 0}), "aaa");
  EXPECT_THROW(alphabet.decode({29}), Error);
  EXPECT_THROW(alphabet.decode({-1}), Error);
}

TEST(Alphabet, EncodeReportsEachUnknownCharacterOnce) {
  const Alphabet alphabet = Alphabet::english();
  std::string bad;
  const std::vector<int> classes = alphabet.encode("caf\u00e9 42 \u00e9!2", &bad);
  EXPECT_EQ(bad, "\u00e942!");
  EXPECT_EQ(classes, (std::vector<int>{5, 3, 8, 1, 1}));  // "caf", and two spaces

  EXPECT_EQ(alphabet.encode("a\xFF"
                            "b",
                            &bad),
            (std::vector<int>{3, 4}));
  EXPECT_EQ(bad, "\xEF\xBF\xBD") << "an invalid byte shows as U+FFFD";

  EXPECT_THROW(alphabet.encode("A", nullptr), Error);
}

TEST(Alphabet, RejectsRepeatedOrMultiCharacterSymbols) {
  EXPECT_THROW(Alphabet({"a", "b", "a"}), Error);
  EXPECT_THROW(Alphabet({"ab"}), Error);
  EXPECT_THROW(Alphabet(std::vector<std::string>{}), Error);
}

TEST(TextNormalization, Examples) {
  EXPECT_EQ(spell("Hello, World! 42"), "hello world four two");
  EXPECT_EQ(spell("  Multiple   spaces\tand\nlines \r\n"), "multiple spaces and lines");
  EXPECT_EQ(spell("well-known e_mail and/or fax"), "well known e mail and or fax");
  EXPECT_EQ(spell("Don\u2019t stop\u2014rock \u2019n\u2019 roll"), "don't stop rock 'n' roll");
  EXPECT_EQ(spell("\u201cQuoted,\u201d she said\u2026 \u00bfQu\u00c9?"),
            "quoted she said qu\u00e9");
  EXPECT_EQ(spell("\u00c9COLE \u00c7a \u00d7"), "\u00e9cole \u00e7a \u00d7");
  EXPECT_EQ(spell("42nd"), "four two nd");
  EXPECT_EQ(spell("3.14"), "three one four");
  EXPECT_EQ(spell("...!?"), "");
  EXPECT_EQ(spell(""), "");
  EXPECT_EQ(spell("\u03a9 x\xFF"), "\u03a9 x\xFF") << "other characters pass through";
}

TEST(TextNormalization, KeepDigitsPolicy) {
  TextNormalization keep;
  keep.digits = parse_digits_policy("keep");
  EXPECT_EQ(normalize_text("Room 101, Floor-2", keep), "room 101 floor 2");
  EXPECT_EQ(parse_digits_policy("spell"), TextNormalization::Digits::kSpell);
  EXPECT_THROW(parse_digits_policy("words"), Error);
}

TEST(TextNormalization, NormalizedEnglishEncodesWithoutUnknowns) {
  const Alphabet alphabet = Alphabet::english();
  std::string bad;
  const std::string text = spell("It's 9 o'clock -- the \"end\"; (really) [sic].");
  EXPECT_EQ(text, "it's nine o'clock the end really sic");
  alphabet.encode(text, &bad);
  EXPECT_EQ(bad, "");
}

class AlphabetFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = (fs::temp_directory_path() / ("ds2_alphabet_" + std::string(info->name()) + "_" +
                                          std::to_string(::getpid()) + ".txt"))
                .string();
  }
  void TearDown() override { fs::remove(path_); }

  void write(const std::string& contents) { std::ofstream(path_, std::ios::binary) << contents; }

  // The message from_file throws for the current file contents.
  std::string error_message() {
    try {
      Alphabet::from_file(path_);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }

  std::string path_;
};

TEST_F(AlphabetFileTest, ReadsSymbolsSpaceCommentsAndEscapedHash) {
  write("# my alphabet\r\n<space>\r\na\nb\n\\#\n\u00e9\n");
  const Alphabet alphabet = Alphabet::from_file(path_);
  EXPECT_EQ(alphabet.symbols(), (std::vector<std::string>{" ", "a", "b", "#", "\u00e9"}));
  EXPECT_EQ(alphabet.num_classes(), 6);
  std::string bad;
  EXPECT_EQ(alphabet.encode("a \u00e9#", &bad), (std::vector<int>{2, 1, 5, 4}));
  EXPECT_EQ(bad, "");
  EXPECT_EQ(alphabet.decode({5, 0, 1, 3}), "\u00e9 b");
}

TEST_F(AlphabetFileTest, LiteralSpaceLineIsTheSpaceSymbol) {
  write("a\n \n");
  EXPECT_EQ(Alphabet::from_file(path_).symbols(), (std::vector<std::string>{"a", " "}));
}

TEST_F(AlphabetFileTest, ErrorsNameFileAndLine) {
  write("a\nb\na\n");
  EXPECT_EQ(error_message(), path_ + ":3: symbol 'a' repeats line 1");
  write("a\nab\n");
  EXPECT_EQ(error_message(), path_ + ":2: expected one character per line, got 'ab'");
  write("a\n\nb\n");
  EXPECT_EQ(error_message(), path_ + ":2: empty line (write <space> for the space symbol)");
  write("<blank>\na\n");
  EXPECT_EQ(error_message(),
            path_ + ":1: the CTC blank is implicit (class 0); remove '<blank>' from the alphabet");
  write("a\n\xC3\n");
  EXPECT_EQ(error_message(), path_ + ":2: invalid UTF-8");
  write("# only a comment\n");
  EXPECT_EQ(error_message(), "alphabet file '" + path_ + "' has no symbols");
  fs::remove(path_);
  EXPECT_EQ(error_message(), "cannot open alphabet file '" + path_ + "'");
}

}  // namespace
}  // namespace ds2
