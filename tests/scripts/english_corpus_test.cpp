// Builds the `tiny` English corpus with scripts/make-english-corpus.sh (espeak-ng, sox, flac and
// the fortune files, which scripts/install-deps.sh installs; skipped, saying why, without them)
// and checks what it wrote: manifests in ds2's form whose durations are the audio's, 16 kHz
// mono FLAC, normalized transcripts, dev and test sentences and voices never in train, an ARPA
// LM of the training side that ds2 loads, the same bytes from the same seed (and from the tools
// bundled by scripts/bundle-corpus-tools.sh), and `ds2 validate-data` accepting every split.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "audio/audio_io.h"
#include "ctc/arpa_lm.h"
#include "data/alphabet.h"
#include "support/run_command.h"

namespace ds2 {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::shell_quote;

const char* const kSplits[] = {"train", "dev", "test"};
const std::map<std::string, size_t> kTinyCounts = {{"train", 24}, {"dev", 8}, {"test", 8}};

struct Utterance {
  std::string audio;
  double duration = 0;
  std::string text;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, '\t')) fields.push_back(field);
  return fields;
}

// What the corpus builder needs, or "" when everything is there.
std::string missing_tools() {
  std::string missing;
  for (const char* tool : {"espeak-ng", "sox", "flac", "python3"}) {
    if (run_command(std::string("command -v ") + tool + " >/dev/null").code != 0)
      missing += std::string(missing.empty() ? "" : ", ") + tool;
  }
  for (const char* file : {"fortunes", "people"}) {
    if (!fs::exists(fs::path("/usr/share/games/fortunes") / file))
      missing += std::string(missing.empty() ? "" : ", ") + "/usr/share/games/fortunes/" + file;
  }
  return missing;
}

// One corpus per seed and job count, built once for the whole suite.
class EnglishCorpus : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(fs::temp_directory_path() /
                         ("ds2_EnglishCorpus_" + std::to_string(::getpid())));
    fs::remove_all(*root_);
    fs::create_directories(*root_);
    missing_ = new std::string(missing_tools());
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    fs::remove_all(*root_, ignored);
    delete root_;
    delete missing_;
    root_ = nullptr;
    missing_ = nullptr;
  }
  void SetUp() override {
    if (!missing_->empty())
      GTEST_SKIP() << "the English corpus builder needs " << *missing_
                   << " (scripts/install-deps.sh installs them)";
  }

  // The tiny corpus for `seed` built with `jobs` processes (built on first use).
  static fs::path corpus(int seed = 1, int jobs = 2) {
    const fs::path dir = *root_ / ("seed" + std::to_string(seed) + "_jobs" + std::to_string(jobs));
    if (!fs::exists(dir / "test.jsonl")) {
      const auto r =
          run_command(std::string(DS2_SOURCE_DIR) + "/scripts/make-english-corpus.sh tiny " +
                      shell_quote(dir.string()) + " --seed " + std::to_string(seed) + " --jobs " +
                      std::to_string(jobs));
      EXPECT_EQ(r.code, 0) << r.output;
    }
    return dir;
  }

  static std::vector<Utterance> manifest(const fs::path& dir, const std::string& split) {
    std::vector<Utterance> utts;
    for (const std::string& line : lines_of(dir / (split + ".jsonl"))) {
      const nlohmann::json j = nlohmann::json::parse(line);
      EXPECT_TRUE(j.is_object() && j.size() == 3) << line;
      utts.push_back({j.at("audio_filepath").get<std::string>(), j.at("duration").get<double>(),
                      j.at("text").get<std::string>()});
    }
    return utts;
  }

  static fs::path* root_;
  static std::string* missing_;
};

fs::path* EnglishCorpus::root_ = nullptr;
std::string* EnglishCorpus::missing_ = nullptr;

TEST_F(EnglishCorpus, ManifestsMatchTheAudioAndTranscriptsAreNormalized) {
  const fs::path dir = corpus();
  for (const char* split : kSplits) {
    const std::vector<Utterance> utts = manifest(dir, split);
    ASSERT_EQ(utts.size(), kTinyCounts.at(split)) << split;
    for (size_t i = 0; i < utts.size(); ++i) {
      const Utterance& u = utts[i];
      char expected[64];
      std::snprintf(expected, sizeof expected, "audio/%s/%s_%05zu.flac", split, split, i);
      EXPECT_EQ(u.audio, expected);
      const AudioInfo info = probe_audio((dir / u.audio).string());
      EXPECT_EQ(info.format, "flac");
      EXPECT_EQ(info.encoding, "pcm16");
      EXPECT_EQ(info.sample_rate, 16000);
      EXPECT_EQ(info.channels, 1);
      EXPECT_NEAR(u.duration, info.duration_s, 0.0005) << u.audio;
      EXPECT_GT(u.duration, 0.5) << u.audio;
      EXPECT_LT(u.duration, 20) << u.audio;
      // Decodes in full and is neither silent nor clipped.
      int rate = 0;
      const std::vector<float> samples = read_audio((dir / u.audio).string(), &rate);
      ASSERT_EQ(static_cast<int64_t>(samples.size()), info.frames);
      float peak = 0;
      for (float x : samples) peak = std::max(peak, std::fabs(x));
      EXPECT_GT(peak, 0.1f) << u.audio;
      EXPECT_LT(peak, 0.9f) << u.audio;

      EXPECT_EQ(normalize_text(u.text, {}), u.text);
      EXPECT_EQ(u.text.find_first_not_of("abcdefghijklmnopqrstuvwxyz' "), std::string::npos)
          << u.text;
      std::istringstream words(u.text);
      const auto count = std::distance(std::istream_iterator<std::string>(words),
                                       std::istream_iterator<std::string>());
      EXPECT_GE(count, 3) << u.text;
      EXPECT_LE(count, 20) << u.text;
    }
  }
  EXPECT_TRUE(fs::exists(dir / "ATTRIBUTION.md"));
  EXPECT_NE(read_file(dir / "ATTRIBUTION.md").find("BSD"), std::string::npos);
}

TEST_F(EnglishCorpus, DevAndTestSentencesAndVoicesAreNeverInTrain) {
  const fs::path dir = corpus();
  std::map<std::string, std::set<std::string>> texts;
  for (const char* split : kSplits) {
    for (const Utterance& u : manifest(dir, split)) texts[split].insert(u.text);
  }
  // Dev and test speak each of their sentences once.
  EXPECT_EQ(texts["dev"].size(), kTinyCounts.at("dev"));
  EXPECT_EQ(texts["test"].size(), kTinyCounts.at("test"));

  // How each utterance was made: accent and variant per audio file.
  const std::vector<std::string> rows = lines_of(dir / "synthesis.tsv");
  ASSERT_FALSE(rows.empty());
  const std::vector<std::string> header = split_tabs(rows[0]);
  const auto column = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    EXPECT_NE(it, header.end()) << name;
    return static_cast<size_t>(it - header.begin());
  };
  const size_t audio_col = column("audio_filepath"), split_col = column("split"),
               accent_col = column("accent"), variant_col = column("variant");
  std::map<std::string, std::set<std::string>> voices;
  std::set<std::string> audio_files;
  for (size_t i = 1; i < rows.size(); ++i) {
    const std::vector<std::string> f = split_tabs(rows[i]);
    ASSERT_EQ(f.size(), header.size()) << rows[i];
    voices[f[split_col]].insert(f[accent_col] + "+" + f[variant_col]);
    audio_files.insert(f[audio_col]);
  }
  EXPECT_EQ(rows.size() - 1, 40u);
  for (const char* split : kSplits) {
    for (const Utterance& u : manifest(dir, split)) EXPECT_EQ(audio_files.count(u.audio), 1u);
  }

  const auto disjoint = [](const std::set<std::string>& a, const std::set<std::string>& b) {
    for (const std::string& x : a) {
      if (b.count(x)) return x;
    }
    return std::string();
  };
  for (const auto& [a, b] :
       {std::pair<std::string, std::string>{"train", "dev"}, {"train", "test"}, {"dev", "test"}}) {
    EXPECT_EQ(disjoint(texts[a], texts[b]), "") << a << " and " << b << " share a sentence";
    EXPECT_EQ(disjoint(voices[a], voices[b]), "") << a << " and " << b << " share a voice";
    EXPECT_FALSE(voices[a].empty());
  }

  // The LM's text is the training side: every train sentence, no dev or test sentence.
  std::set<std::string> lm_text;
  for (const std::string& line : lines_of(dir / "train-text.txt")) lm_text.insert(line);
  for (const std::string& t : texts["train"]) EXPECT_EQ(lm_text.count(t), 1u) << t;
  EXPECT_EQ(disjoint(texts["dev"], lm_text), "");
  EXPECT_EQ(disjoint(texts["test"], lm_text), "");
  const ArpaLm lm = ArpaLm::load((dir / "lm-3gram.arpa").string());
  EXPECT_EQ(lm.order(), 3);
  std::istringstream words(*texts["train"].begin());
  for (std::string w; words >> w;) EXPECT_TRUE(lm.has_word(w)) << w;
}

TEST_F(EnglishCorpus, SameSeedGivesTheSameBytesForAnyJobCount) {
  const fs::path a = corpus(1, 2), b = corpus(1, 1);
  std::vector<std::string> files_a, files_b;
  for (const auto& e : fs::recursive_directory_iterator(a)) {
    if (e.is_regular_file()) files_a.push_back(fs::relative(e.path(), a).string());
  }
  for (const auto& e : fs::recursive_directory_iterator(b)) {
    if (e.is_regular_file()) files_b.push_back(fs::relative(e.path(), b).string());
  }
  std::sort(files_a.begin(), files_a.end());
  std::sort(files_b.begin(), files_b.end());
  ASSERT_EQ(files_a, files_b);
  EXPECT_GT(files_a.size(), 40u);
  for (const std::string& f : files_a) EXPECT_TRUE(read_file(a / f) == read_file(b / f)) << f;

  const fs::path other = corpus(2, 2);
  EXPECT_NE(read_file(a / "train.jsonl"), read_file(other / "train.jsonl"));
  EXPECT_NE(read_file(a / "test.jsonl"), read_file(other / "test.jsonl"));
}

// scripts/bundle-corpus-tools.sh: the tools, libraries, voice data and fortunes copied into one
// folder build the same corpus as the installed packages (only ATTRIBUTION.md names the folder).
TEST_F(EnglishCorpus, BundledToolsBuildTheSameCorpus) {
  const fs::path installed = corpus();
  const fs::path tools = *root_ / "tools", dir = *root_ / "bundled";
  const std::string src = DS2_SOURCE_DIR;
  auto r = run_command(src + "/scripts/bundle-corpus-tools.sh " + shell_quote(tools.string()));
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_command("bash -c " +
                  shell_quote("source " + shell_quote((tools / "env.sh").string()) +
                              " && espeak-ng --version && " + src +
                              "/scripts/make-english-corpus.sh tiny " + shell_quote(dir.string()) +
                              " --fortunes \"$CORPUS_TOOLS/fortunes\" --jobs 2"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("Data at: " + (tools / "share").string()), std::string::npos) << r.output;
  size_t compared = 0;
  for (const auto& e : fs::recursive_directory_iterator(installed)) {
    if (!e.is_regular_file() || e.path().filename() == "ATTRIBUTION.md") continue;
    const fs::path rel = fs::relative(e.path(), installed);
    EXPECT_TRUE(read_file(e.path()) == read_file(dir / rel)) << rel;
    ++compared;
  }
  EXPECT_GT(compared, 40u);
}

TEST_F(EnglishCorpus, ValidateDataAcceptsEverySplitWithTheRecipe) {
  const fs::path dir = corpus();
  const std::string recipe = std::string(DS2_SOURCE_DIR) + "/configs/english-small.yaml";
  for (const auto& [train, dev] :
       {std::pair<std::string, std::string>{"train", "dev"}, {"test", "dev"}}) {
    const auto r =
        run_command(std::string(DS2_BINARY) + " validate-data " + shell_quote(recipe) +
                    " data.train_manifest=" + shell_quote((dir / (train + ".jsonl")).string()) +
                    " data.dev_manifest=" + shell_quote((dir / (dev + ".jsonl")).string()));
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find(", 0 problems"), std::string::npos) << r.output;
    EXPECT_NE(
        r.output.find("summary: " + std::to_string(kTinyCounts.at(train) + kTinyCounts.at(dev)) +
                      " utterances checked, 0 problems"),
        std::string::npos)
        << r.output;
  }
}

}  // namespace
}  // namespace ds2
