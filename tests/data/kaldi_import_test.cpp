#include "data/kaldi_import.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace ds2 {
namespace {

namespace fs = std::filesystem;

class KaldiImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::temp_directory_path() /
            ("ds2_kaldi_" + std::string(info->name()) + "_" + std::to_string(::getpid())))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    wav_scp_ = dir_ + "/wav.scp";
    text_ = dir_ + "/text";
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const std::string& path, const std::string& contents) {
    std::ofstream(path, std::ios::binary) << contents;
  }

  std::string dir_, wav_scp_, text_;
};

TEST_F(KaldiImportTest, JoinsWavScpAndTextInWavScpOrder) {
  write(wav_scp_,
        "utt1 /data/a.wav\n"
        "utt2   rel/b.flac  \r\n"
        "\n"
        "utt3 sox c.sph -t wav - |\n"
        "utt5 /data/e.wav\n"
        "utt1 /data/again.wav\n"
        "utt6 feats/raw.ark:1234\n"
        "utt7\n");
  write(text_,
        "utt2 HELLO  THERE\n"
        "utt1 one two\n"
        "utt3 x\n"
        "utt4 orphan\n"
        "utt6 y\n"
        "utt7 z\n");
  std::vector<std::string> problems;
  const std::vector<Utterance> utts = import_kaldi_dir(dir_, &problems);

  ASSERT_EQ(utts.size(), 2u);
  EXPECT_EQ(utts[0].id, "utt1");
  EXPECT_EQ(utts[0].audio_path, "/data/a.wav");
  EXPECT_EQ(utts[0].text, "one two");
  EXPECT_EQ(utts[0].duration_s, kUnknownDuration);
  EXPECT_EQ(utts[0].manifest, wav_scp_);
  EXPECT_EQ(utts[0].line, 1);
  EXPECT_EQ(utts[1].id, "utt2");
  EXPECT_EQ(utts[1].audio_path, "rel/b.flac");
  EXPECT_EQ(utts[1].text, "HELLO  THERE") << "transcripts are kept as written";
  EXPECT_EQ(utts[1].line, 2);

  const std::vector<std::string> expected = {
      wav_scp_ + ":6: repeated utterance id 'utt1' (first at line 1)",
      wav_scp_ +
          ":4: utterance 'utt3': piped command 'sox c.sph -t wav - |' is not supported; "
          "convert the audio to files and list their paths",
      wav_scp_ + ":5: utterance 'utt5' has no transcript in " + text_,
      wav_scp_ +
          ":7: utterance 'utt6': archive offset 'feats/raw.ark:1234' is not supported; "
          "list audio files instead",
      wav_scp_ + ":8: utterance 'utt7': expected '<utterance-id> <audio path>'",
      text_ + ":4: utterance 'utt4' has no audio in " + wav_scp_,
  };
  EXPECT_EQ(problems, expected);
}

TEST_F(KaldiImportTest, EmptyTranscriptIsAllowed) {
  write(wav_scp_, "silence /data/s.wav\n");
  write(text_, "silence\n");
  const std::vector<Utterance> utts = import_kaldi_dir(dir_, nullptr);
  ASSERT_EQ(utts.size(), 1u);
  EXPECT_EQ(utts[0].text, "");
}

TEST_F(KaldiImportTest, SegmentsFileIsReportedAsUnsupported) {
  write(wav_scp_, "rec1 /data/rec1.wav\n");
  write(text_, "utt1 hello\n");
  write(dir_ + "/segments", "utt1 rec1 0.0 1.5\n");
  std::vector<std::string> problems;
  EXPECT_TRUE(import_kaldi_dir(dir_, &problems).empty());
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], dir_ +
                             "/segments:1: segments files are not supported (wav.scp then "
                             "lists recordings, not utterances); cut the segments into audio "
                             "files first");
}

TEST_F(KaldiImportTest, ThrowsOnFirstProblemWithoutSink) {
  write(wav_scp_, "utt1 /data/a.wav\nutt2 cat b.wav |\n");
  write(text_, "utt1 a\nutt2 b\n");
  try {
    import_kaldi_dir(dir_, nullptr);
    FAIL() << "expected ds2::Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              wav_scp_ +
                  ":2: utterance 'utt2': piped command 'cat b.wav |' is not supported; "
                  "convert the audio to files and list their paths");
  }
}

TEST_F(KaldiImportTest, MissingFilesThrow) {
  write(wav_scp_, "utt1 /data/a.wav\n");
  EXPECT_THROW(import_kaldi_dir(dir_, nullptr), Error);
  EXPECT_THROW(import_kaldi_dir(dir_ + "/absent", nullptr), Error);
}

}  // namespace
}  // namespace ds2
