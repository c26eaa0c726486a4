// `ds2 transcribe` as a user runs it: JSON output with word timings, paths from stdin and from a
// manifest, a recording long enough for several windows, and unreadable files reported in place.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "ctc/trn_score.h"
#include "data/manifest.h"
#include "support/run_command.h"
#include "support/temp_dir.h"
#include "support/tiny_model.h"
#include "train/transcribe.h"

namespace ds2 {
namespace {

using testing::run_command;
using testing::shell_quote;

class TranscribeCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::TinyModel& model = testing::shared_tiny_model();
    dir_ = &model.dir;
    manifest_ = &model.manifest;
    checkpoint_ = &model.checkpoint;
  }
  static std::string ds2(const std::string& args) {
    return std::string(DS2_BINARY) + " transcribe " + shell_quote(*checkpoint_) + " " + args;
  }
  static std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }

  static TempDir* dir_;
  static std::string* manifest_;
  static std::string* checkpoint_;
};
TempDir* TranscribeCli::dir_ = nullptr;
std::string* TranscribeCli::manifest_ = nullptr;
std::string* TranscribeCli::checkpoint_ = nullptr;

TEST_F(TranscribeCli, JsonHasTextWordTimesAndConfidences) {
  std::vector<std::string> paths = manifest_audio_paths(*manifest_);
  paths.resize(3);
  // 50 s: three 20 s windows.
  paths.push_back(testing::splice_digits(dir_->path(), "george", 50.0, "fifty.wav").path);
  std::string args;
  for (const auto& p : paths) args += shell_quote(p) + " ";
  const auto text = run_command(ds2(args), false);
  ASSERT_EQ(text.code, 0) << text.output;
  const auto json = run_command(ds2(args + "--format json"), false);
  ASSERT_EQ(json.code, 0) << json.output;
  const std::vector<std::string> text_lines = lines(text.output), json_lines = lines(json.output);
  ASSERT_EQ(json_lines.size(), paths.size()) << json.output;
  ASSERT_EQ(text_lines.size(), paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    const nlohmann::json j = nlohmann::json::parse(json_lines[i]);
    EXPECT_EQ(j.at("path"), paths[i]);
    EXPECT_EQ(text_lines[i], paths[i] + "\t" + j.at("text").get<std::string>());
    const double duration = j.at("duration");
    EXPECT_GT(duration, 0.3);
    const double confidence = j.at("confidence");
    EXPECT_GT(confidence, 0.3);
    EXPECT_LE(confidence, 1.0);
    std::string joined;
    double previous_end = 0;
    ASSERT_FALSE(j.at("words").empty()) << json_lines[i];
    for (const auto& w : j.at("words")) {
      EXPECT_EQ(w.size(), 4u);
      const double start = w.at("start"), end = w.at("end"), c = w.at("confidence");
      EXPECT_GE(start, previous_end) << json_lines[i];
      EXPECT_GT(end, start) << json_lines[i];
      EXPECT_LE(end, duration) << json_lines[i];
      EXPECT_GT(c, 0.0);
      EXPECT_LE(c, 1.0);
      previous_end = end;
      joined += (joined.empty() ? "" : " ") + w.at("word").get<std::string>();
    }
    EXPECT_EQ(joined, j.at("text"));
    // Keys in the documented order.
    EXPECT_EQ(json_lines[i].rfind("{\"path\":", 0), 0u);
    EXPECT_NE(json_lines[i].find("\"duration\":"), std::string::npos);
  }
  // The 50 s recording: its words span it (pauses are under 0.4 s).
  const nlohmann::json last = nlohmann::json::parse(json_lines.back());
  EXPECT_GT(last.at("words").size(), 55u);  // about 0.8 s per word
  EXPECT_LT(last.at("words").front().at("start").get<double>(), 1.0);
  EXPECT_GT(last.at("words").back().at("end").get<double>(), 48.5);
}

TEST_F(TranscribeCli, PathsFromStdinAndFromAManifest) {
  const std::vector<std::string> paths = manifest_audio_paths(*manifest_);
  std::string args, list;
  for (const auto& p : paths) {
    args += shell_quote(p) + " ";
    list += p + "\n";
  }
  std::ofstream(dir_->file("list.txt")) << list << "\n";  // a trailing empty line is ignored
  const auto direct = run_command(ds2(args), false);
  ASSERT_EQ(direct.code, 0) << direct.output;
  EXPECT_EQ(lines(direct.output).size(), paths.size());
  const auto from_stdin = run_command(ds2("- < " + shell_quote(dir_->file("list.txt"))), false);
  EXPECT_EQ(from_stdin.code, 0);
  EXPECT_EQ(from_stdin.output, direct.output);
  const auto from_manifest = run_command(ds2("--manifest " + shell_quote(*manifest_)), false);
  EXPECT_EQ(from_manifest.code, 0);
  EXPECT_EQ(from_manifest.output, direct.output);
  const auto nothing = run_command(ds2(""));
  EXPECT_EQ(nothing.code, 1);
  EXPECT_EQ(nothing.output,
            "ds2: error: transcribe: no audio (give files, '-' to read paths from stdin, or "
            "--manifest M)\n");
}

TEST_F(TranscribeCli, UnreadableFilesAreSkippedInPlaceAndFailTheRun) {
  const std::vector<std::string> paths = manifest_audio_paths(*manifest_);
  const std::string missing = dir_->file("missing.wav");
  const auto r = run_command(
      ds2(shell_quote(paths[0]) + " " + shell_quote(missing) + " " + shell_quote(paths[1])));
  EXPECT_EQ(r.code, 1);
  const std::vector<std::string> out = lines(r.output);
  ASSERT_EQ(out.size(), 3u) << r.output;
  EXPECT_EQ(out[0].rfind(paths[0] + "\t", 0), 0u);
  EXPECT_EQ(out[1].rfind("skip: " + missing + ": ", 0), 0u) << out[1];
  EXPECT_EQ(out[2].rfind(paths[1] + "\t", 0), 0u);
}

// --adapt-bn takes batch-norm statistics from the recordings given, as `ds2 eval --adapt-bn` takes
// them from its manifest: with the same passes and batch size the texts are eval's. A file the
// checks refuse is left out of the statistics, counted, and still reported in place; with no
// usable file at all the command fails saying why.
TEST_F(TranscribeCli, AdaptBnTakesStatisticsFromTheRecordingsAsEvalDoes) {
  const std::string eval_cmd = std::string(DS2_BINARY) + " eval " + shell_quote(*checkpoint_) +
                               " " + shell_quote(*manifest_) +
                               " --greedy --adapt-bn 2 --batch-size 4 --trn " +
                               shell_quote(dir_->file("bn"));
  const auto evaluated = run_command(eval_cmd);
  ASSERT_EQ(evaluated.code, 0) << evaluated.output;
  const std::vector<TrnUtterance> expected = read_trn(dir_->file("bn.hyp.trn"));
  const std::string args = "--greedy --batch-size 4 --manifest " + shell_quote(*manifest_);
  const auto adapted = run_command(ds2(args + " --adapt-bn 2"), false);
  ASSERT_EQ(adapted.code, 0) << adapted.output;
  const std::vector<std::string> texts = lines(adapted.output);
  const std::vector<std::string> paths = manifest_audio_paths(*manifest_);
  ASSERT_EQ(texts.size(), paths.size());
  ASSERT_EQ(expected.size(), paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string& hyp = expected[i].text;  // as written: a space before the "(id)"
    EXPECT_EQ(texts[i], paths[i] + "\t" + hyp.substr(0, hyp.find_last_not_of(' ') + 1));
  }
  // The statistics moved: the model is less or more sure of something.
  const auto plain_json = run_command(ds2(args + " --format json"), false);
  const auto adapted_json = run_command(ds2(args + " --format json --adapt-bn 2"), false);
  ASSERT_EQ(adapted_json.code, 0);
  EXPECT_NE(plain_json.output, adapted_json.output);

  const std::string broken = dir_->file("broken.wav");
  std::ofstream(broken) << "RIFF, but not really a WAV file";
  const auto mixed = run_command(ds2("--adapt-bn 1 " + shell_quote(paths[0]) + " " +
                                     shell_quote(broken) + " " + shell_quote(paths[1])));
  EXPECT_EQ(mixed.code, 1);
  EXPECT_NE(mixed.output.find("batch-norm statistics adapted to 2 of 3 recordings, 1 passes (left "
                              "out: 1, first: <command line>:2: " +
                              broken + ": "),
            std::string::npos)
      << mixed.output;
  EXPECT_NE(mixed.output.find("skip: " + broken + ": "), std::string::npos) << mixed.output;
  const auto none = run_command(ds2("--adapt-bn 1 " + shell_quote(broken)));
  EXPECT_EQ(none.code, 1);
  EXPECT_EQ(none.output.rfind("ds2: error: --adapt-bn: none of the 1 recordings can be used: "
                              "<command line>:1: " +
                                  broken + ": ",
                              0),
            0u)
      << none.output;
}

}  // namespace
}  // namespace ds2
