#include "data/manifest.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace ds2 {
namespace {

namespace fs = std::filesystem;

class ManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("ds2_manifest_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write_file(const std::string& relative, const std::string& contents) {
    const fs::path path = dir_ / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << contents;
    return path.string();
  }

  static std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream contents;
    contents << in.rdbuf();
    return contents.str();
  }

  fs::path dir_;
};

TEST_F(ManifestTest, ReadsEntriesAndResolvesPathsAgainstManifestFolder) {
  const std::string path = write_file(
      "sub/m.jsonl",
      "{\"audio_filepath\": \"audio/a.flac\", \"duration\": 1.5, \"text\": \"one two\"}\n"
      "   \n"
      "{\"audio_filepath\": \"/abs/b.wav\", \"duration\": 2, \"text\": \"three\", "
      "\"id\": \"utt-b\"}\n"
      "{\"utterance_id\": \"c\", \"audio_filepath\": \"../c.flac\", \"duration\": 0.25, "
      "\"text\": \"\", \"speaker\": \"ignored\"}\n");
  std::vector<std::string> problems;
  const std::vector<Utterance> utts = read_manifest(path, &problems);
  EXPECT_TRUE(problems.empty());
  ASSERT_EQ(utts.size(), 3u);

  EXPECT_EQ(utts[0].id, "a@1");
  EXPECT_EQ(utts[0].audio_path, (dir_ / "sub/audio/a.flac").string());
  EXPECT_EQ(utts[0].duration_s, 1.5);
  EXPECT_EQ(utts[0].text, "one two");
  EXPECT_EQ(utts[0].manifest, path);
  EXPECT_EQ(utts[0].line, 1);

  EXPECT_EQ(utts[1].id, "utt-b");
  EXPECT_EQ(utts[1].audio_path, "/abs/b.wav");
  EXPECT_EQ(utts[1].duration_s, 2.0);
  EXPECT_EQ(utts[1].line, 3);

  EXPECT_EQ(utts[2].id, "c");
  EXPECT_EQ(utts[2].audio_path, (dir_ / "c.flac").string());
  EXPECT_EQ(utts[2].text, "");
  EXPECT_EQ(utts[2].line, 4);
}

TEST_F(ManifestTest, RelativeManifestPathGivesPathsRelativeToCurrentDirectory) {
  write_file("sub/m.jsonl",
             "{\"audio_filepath\": \"audio/a.flac\", \"duration\": 1, "
             "\"text\": \"a\"}\n");
  const fs::path relative_dir = fs::relative(dir_ / "sub");
  ASSERT_TRUE(relative_dir.is_relative());
  const std::vector<Utterance> utts = read_manifest((relative_dir / "m.jsonl").string(), nullptr);
  ASSERT_EQ(utts.size(), 1u);
  EXPECT_EQ(utts[0].audio_path, (relative_dir / "audio/a.flac").string());
}

TEST_F(ManifestTest, ToleratesByteOrderMarkAndCrlf) {
  const std::string path =
      write_file("m.jsonl",
                 "\xEF\xBB\xBF{\"audio_filepath\": \"a.wav\", \"duration\": 1, \"text\": \"x\"}\r\n"
                 "{\"audio_filepath\": \"b.wav\", \"duration\": 1, \"text\": \"y\"}\r\n");
  const std::vector<Utterance> utts = read_manifest(path, nullptr);
  ASSERT_EQ(utts.size(), 2u);
  EXPECT_EQ(utts[0].id, "a@1");
  EXPECT_EQ(utts[1].text, "y");
}

TEST_F(ManifestTest, ReportsEachBadLineWithFileAndLine) {
  const std::string path = write_file(
      "bad.jsonl",
      "{\"audio_filepath\": \"ok.wav\", \"duration\": 1, \"text\": \"fine\"}\n"
      "{\"text\": \"a\",}\n"
      "[1, 2]\n"
      "{\"audio_filepath\": \"x.wav\", \"duration\": 1}\n"
      "{\"audio_filepath\": \"x.wav\", \"duration\": \"1.0\", \"text\": \"a\"}\n"
      "{\"audio_filepath\": \"x.wav\", \"duration\": -0.5, \"text\": \"a\"}\n"
      "{\"audio_filepath\": 7, \"duration\": 1, \"text\": \"a\"}\n"
      "{\"audio_filepath\": \"\", \"duration\": 1, \"text\": \"a\"}\n"
      "{\"id\": \"dup\", \"audio_filepath\": \"y.wav\", \"duration\": 1, \"text\": \"a\"}\n"
      "{\"id\": \"dup\", \"audio_filepath\": \"z.wav\", \"duration\": 1, \"text\": \"a\"}\n"
      "{\"id\": 3, \"audio_filepath\": \"z.wav\", \"duration\": 1, \"text\": \"a\"}\n"
      "{\"audio_filepath\": \"x.wav\", \"text\": \"a\"}\n");
  std::vector<std::string> problems;
  const std::vector<Utterance> utts = read_manifest(path, &problems);
  ASSERT_EQ(utts.size(), 2u);
  EXPECT_EQ(utts[0].text, "fine");
  EXPECT_EQ(utts[1].audio_path, (dir_ / "y.wav").string());
  EXPECT_EQ(utts[1].line, 9);

  const std::vector<std::string> expected = {
      path + ":2: invalid JSON at column 14",
      path + ":3: expected a JSON object, got array",
      path + ":4: missing key 'text'",
      path + ":5: key 'duration' must be a number, got string",
      path + ":6: negative duration -0.5",
      path + ":7: key 'audio_filepath' must be a string, got number",
      path + ":8: empty 'audio_filepath'",
      path + ":10: repeated id 'dup' (first at line 9)",
      path + ":11: key 'id' must be a string, got number",
      path + ":12: missing key 'duration'",
  };
  EXPECT_EQ(problems, expected);
}

TEST_F(ManifestTest, ThrowsOnFirstProblemWithoutSink) {
  const std::string path =
      write_file("bad.jsonl",
                 "{\"audio_filepath\": \"ok.wav\", \"duration\": 1, \"text\": \"fine\"}\n"
                 "\n"
                 "{\"audio_filepath\": \"ok.wav\", \"duration\": 1}\n"
                 "not json\n");
  try {
    read_manifest(path, nullptr);
    FAIL() << "expected ds2::Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path + ":3: missing key 'text'");
  }
}

TEST_F(ManifestTest, MissingManifestThrows) {
  std::vector<std::string> problems;
  EXPECT_THROW(read_manifest((dir_ / "absent.jsonl").string(), &problems), Error);
}

TEST_F(ManifestTest, WriteThenReadGivesTheSameUtterances) {
  Utterance near;  // given relative to the current directory, like read_manifest returns
  near.id = "near";
  near.audio_path = fs::relative(dir_ / "audio/a.flac").string();
  near.duration_s = 1.5;
  near.text = "one two";
  Utterance far;
  far.id = "far";
  far.audio_path = "/abs/elsewhere/b.wav";
  far.duration_s = 0.125;
  far.text = "quote \" and \u00e9";

  const std::string path = (dir_ / "out/m.jsonl").string();
  fs::create_directories(dir_ / "out");
  write_manifest(path, {near, far});

  EXPECT_EQ(read_file(path),
            "{\"id\":\"near\",\"audio_filepath\":\"../audio/a.flac\",\"duration\":1.5,"
            "\"text\":\"one two\"}\n"
            "{\"id\":\"far\",\"audio_filepath\":\"/abs/elsewhere/b.wav\",\"duration\":0.125,"
            "\"text\":\"quote \\\" and \u00e9\"}\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "out"), fs::directory_iterator()), 1)
      << "the temporary file must be renamed away";

  const std::vector<Utterance> back = read_manifest(path, nullptr);
  ASSERT_EQ(back.size(), 2u);
  // The manifest was named by an absolute path, so its relative entries resolve to absolute ones.
  EXPECT_EQ(back[0].audio_path, (dir_ / "audio/a.flac").string());
  EXPECT_EQ(back[0].id, "near");
  EXPECT_EQ(back[0].duration_s, 1.5);
  EXPECT_EQ(back[1].audio_path, far.audio_path);
  EXPECT_EQ(back[1].text, far.text);
  EXPECT_EQ(back[1].duration_s, 0.125);
}

// "speaker" is optional: read when present (a non-empty string), written back when known.
TEST_F(ManifestTest, SpeakerIsOptionalAndRoundTrips) {
  const std::string path = write_file(
      "s.jsonl",
      "{\"audio_filepath\": \"a.wav\", \"duration\": 1, \"text\": \"one\", \"speaker\": "
      "\"lucas\"}\n"
      "{\"audio_filepath\": \"b.wav\", \"duration\": 1, \"text\": \"two\"}\n"
      "{\"audio_filepath\": \"c.wav\", \"duration\": 1, \"text\": \"six\", \"speaker\": \"\"}\n"
      "{\"audio_filepath\": \"d.wav\", \"duration\": 1, \"text\": \"six\", \"speaker\": 3}\n");
  std::vector<std::string> problems;
  const std::vector<Utterance> utts = read_manifest(path, &problems);
  ASSERT_EQ(utts.size(), 2u);
  EXPECT_EQ(utts[0].speaker, "lucas");
  EXPECT_EQ(utts[1].speaker, "");
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0], path + ":3: empty 'speaker'");
  EXPECT_NE(problems[1].find(path + ":4: key 'speaker'"), std::string::npos) << problems[1];
  const std::string out = (dir_ / "back.jsonl").string();
  write_manifest(out, utts);
  const std::vector<Utterance> back = read_manifest(out, nullptr);
  EXPECT_EQ(back[0].speaker, "lucas");
  EXPECT_EQ(back[1].speaker, "");
  EXPECT_EQ(read_file(out).find("speaker", read_file(out).find('\n')), std::string::npos)
      << "no key for an unknown speaker";
}

TEST_F(ManifestTest, WriteRefusesUnknownDuration) {
  Utterance utt;
  utt.id = "kaldi-utt";
  utt.audio_path = "/a.wav";
  const std::string path = (dir_ / "m.jsonl").string();
  EXPECT_THROW(write_manifest(path, {utt}), Error);
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(ManifestTest, ReadsFromAStream) {
  std::istringstream in(
      "{\"audio_filepath\": \"a.wav\", \"duration\": 1, \"text\": \"x\"}\n"
      "{\"audio_filepath\": \"b.wav\"}\n");
  std::vector<std::string> problems;
  const std::vector<Utterance> utts = read_manifest(in, "/data/m.jsonl", &problems);
  ASSERT_EQ(utts.size(), 1u);
  EXPECT_EQ(utts[0].audio_path, "/data/a.wav");
  EXPECT_EQ(utts[0].manifest, "/data/m.jsonl");
  EXPECT_EQ(problems, std::vector<std::string>{"/data/m.jsonl:2: missing key 'text'"});
}

TEST_F(ManifestTest, RepeatedKeysAndControlCharactersInIdsAreProblems) {
  // nlohmann::json silently kept the last of two "text" keys; ids with a line break made
  // multi-line problem reports.
  const std::string path = write_file(
      "m.jsonl",
      "{\"audio_filepath\": \"a.wav\", \"duration\": 1, \"text\": \"a\", \"text\": \"b\"}\n"
      "{\"id\": \"x\\ny\", \"audio_filepath\": \"b.wav\", \"duration\": 1, \"text\": \"a\"}\n"
      "{\"id\": \"t\\u0009\", \"audio_filepath\": \"c.wav\", \"duration\": 1, \"text\": \"a\"}\n"
      "{\"audio_filepath\": \"d.wav\", \"duration\": 1, \"text\": \"a\", "
      "\"meta\": {\"k\": 1, \"k\": 2}}\n"
      "{\"id\": \"caf\\u00e9 \\\\ 1\", \"audio_filepath\": \"e.wav\", \"duration\": 1, \"text\": "
      "\"a\"}\n"
      "{\"id\": \"caf\\u00e9 \\\\ 1\", \"audio_filepath\": \"f.wav\", \"duration\": 1, \"text\": "
      "\"a\"}\n");
  std::vector<std::string> problems;
  const std::vector<Utterance> utts = read_manifest(path, &problems);
  ASSERT_EQ(utts.size(), 2u);  // nested objects are not inspected ("meta" is ignored)
  EXPECT_EQ(utts[0].line, 4);
  EXPECT_EQ(utts[1].id, "caf\u00e9 \\ 1");
  const std::vector<std::string> expected = {
      path + ":1: repeated key 'text'",
      path + ":2: key 'id' contains a control character: 'x\\ny'",
      path + ":3: key 'id' contains a control character: 't\\t'",
      path + ":6: repeated id 'caf\u00e9 \\\\ 1' (first at line 5)",
  };
  EXPECT_EQ(problems, expected);
}

TEST_F(ManifestTest, NumberOutOfRangeIsAProblemNotACrash) {
  // nlohmann::json throws out_of_range, not parse_error, for numbers beyond a double; it escaped
  // read_manifest (found by fuzz_manifest; tests/fuzz/corpus/manifest/crash-number-overflow).
  const std::string path = write_file(
      "m.jsonl",
      "{\"audio_filepath\": \"a.wav\", \"duration\": 1e999, \"text\": \"a\"}\n"
      "1e516\n"
      "{\"audio_filepath\": \"b.wav\", \"duration\": 1, \"text\": \"a\", \"x\": -1e400}\n"
      "{\"audio_filepath\": \"c.wav\", \"duration\": 1, \"text\": \"a\"}\n");
  std::vector<std::string> problems;
  const std::vector<Utterance> utts = read_manifest(path, &problems);
  ASSERT_EQ(utts.size(), 1u);
  EXPECT_EQ(utts[0].line, 4);
  const std::string reason = ": invalid JSON: a number is too large for a double";
  EXPECT_EQ(problems, (std::vector<std::string>{path + ":1" + reason, path + ":2" + reason,
                                                path + ":3" + reason}));
  EXPECT_THROW(read_manifest(path, nullptr), Error);
}

}  // namespace
}  // namespace ds2
