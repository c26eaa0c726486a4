#include "train/text_decoder.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "core/error.h"
#include "support/temp_dir.h"
#include "train/evaluate.h"

namespace ds2 {
namespace {

// Classes: 0 blank, then the English alphabet: 1 space, 2 apostrophe, 3 'a', ... 28 'z'.
int cls(char c) {
  const Alphabet en = Alphabet::english();
  for (int k = 1; k <= en.size(); ++k)
    if (en.symbol(k) == std::string(1, c)) return k;
  return -1;
}

// A unigram LM over three words; "ten" is likelier than "tan".
std::string write_lm(const TempDir& dir) {
  const std::string path = dir.file("words.arpa");
  std::ofstream(path) << "\\data\\\nngram 1=6\n\n\\1-grams:\n-1.0 </s>\n-99 <s>\n-4.0 <unk>\n"
                         "-0.3 ten\n-2.0 tan\n-0.5 to\n\\end\\\n";
  return path;
}

// Frames spelling "t {a|e} n" with 'a' slightly ahead of 'e'.
UtteranceLogits tan_or_ten() {
  UtteranceLogits u;
  u.classes = Alphabet::english().num_classes();
  const std::vector<std::vector<std::pair<int, float>>> frames = {
      {{cls('t'), 5.f}}, {{cls('a'), 3.1f}, {cls('e'), 3.0f}}, {{0, 4.f}}, {{cls('n'), 5.f}}};
  for (const auto& peaks : frames) {
    std::vector<float> row(u.classes, 0.f);
    for (auto [k, v] : peaks) row[k] = v;
    u.data.insert(u.data.end(), row.begin(), row.end());
    ++u.frames;
  }
  return u;
}

TEST(TextDecoder, ChoosesGreedyOrBeamFromTheConfig) {
  const Alphabet en = Alphabet::english();
  EXPECT_TRUE(TextDecoder(en).greedy());
  DecodeConfig c;
  EXPECT_EQ(effective_beam_width(c), 1);
  EXPECT_TRUE(TextDecoder(en, c).greedy());
  EXPECT_EQ(TextDecoder(en, c).describe(), "greedy");
  c.beam_width = 8;
  EXPECT_FALSE(TextDecoder(en, c).greedy());
  EXPECT_EQ(TextDecoder(en, c).describe(), "beam 8");
  TempDir dir;
  c.beam_width = 0;
  c.lm_path = write_lm(dir);
  EXPECT_EQ(effective_beam_width(c), 32);
  c.lm_weight = 0.5;
  c.word_score = 1;
  const TextDecoder fused(en, c);
  EXPECT_TRUE(fused.has_lm());
  EXPECT_EQ(fused.describe(), "beam 32 + LM " + c.lm_path + " (alpha 0.5, beta 1)");
  EXPECT_EQ(fused.with_lm_weights(2, 0).describe(),
            "beam 32 + LM " + c.lm_path + " (alpha 2, beta 0)");
}

TEST(TextDecoder, LanguageModelChangesTheWord) {
  const Alphabet en = Alphabet::english();
  const UtteranceLogits u = tan_or_ten();
  EXPECT_EQ(TextDecoder(en).decode(u.data.data(), u.frames, 1, u.classes, 0, u.frames), "tan");
  TempDir dir;
  DecodeConfig c;
  c.lm_path = write_lm(dir);
  c.lm_weight = 1.0;
  const TextDecoder fused(en, c);
  EXPECT_EQ(fused.decode(u.data.data(), u.frames, 1, u.classes, 0, u.frames), "ten");
  EXPECT_EQ(fused.with_lm_weights(0, 0).decode(u.data.data(), u.frames, 1, u.classes, 0, u.frames),
            "tan");
}

TEST(TextDecoder, ErrorsNameTheFileOrTheOption) {
  TempDir dir;
  DecodeConfig c;
  c.lm_path = dir.file("none.arpa");
  try {
    TextDecoder(Alphabet::english(), c);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              c.lm_path +
                  ": cannot open language model file (decode.lm_path; --lm PATH "
                  "replaces it, --greedy decodes without it)");
  }
  std::ofstream(dir.file("nounk.arpa"))
      << "\\data\\\nngram 1=3\n\\1-grams:\n-1 </s>\n-99 <s>\n-0.1 ten\n\\end\\\n";
  c.lm_path = dir.file("nounk.arpa");
  try {
    TextDecoder(Alphabet::english(), c);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              c.lm_path +
                  ": the LM has no <unk>; set decode.unk_log10_prob (< 0) to score words "
                  "outside its vocabulary");
  }
  c.unk_log10_prob = -6;
  EXPECT_NO_THROW(TextDecoder(Alphabet::english(), c));
  // Words need spaces between them.
  const Alphabet no_space({"a", "b"});
  EXPECT_THROW(TextDecoder(no_space, c), Error);
}

TEST(TextDecoder, ThreadCountDoesNotChangeResults) {
  std::mt19937 rng(11);
  std::normal_distribution<float> noise(0, 3);
  std::uniform_int_distribution<int> frames(0, 60);
  std::vector<UtteranceLogits> logits(40);
  for (auto& u : logits) {
    u.classes = Alphabet::english().num_classes();
    u.frames = frames(rng);
    u.data.resize(static_cast<size_t>(u.frames) * u.classes);
    for (float& x : u.data) x = noise(rng);
  }
  TempDir dir;
  DecodeConfig c;
  c.lm_path = write_lm(dir);
  c.beam_width = 6;
  const TextDecoder fused(Alphabet::english(), c);
  const std::vector<std::string> one = decode_logits(logits, fused, 1);
  const std::vector<std::string> four = decode_logits(logits, fused, 4);
  ASSERT_EQ(one.size(), logits.size());
  EXPECT_EQ(one, four);
  for (size_t i = 0; i < logits.size(); ++i) {
    const UtteranceLogits& u = logits[i];
    EXPECT_EQ(one[i], fused.decode(u.data.data(), u.frames, 1, u.classes, 0, u.frames));
  }
  EXPECT_TRUE(one[0].size() + one[1].size() + one[2].size() > 0);  // noise decodes to something
}

}  // namespace
}  // namespace ds2
