#include "audio/audio_io.h"

#include <gtest/gtest.h>
#include <sndfile.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "core/rng.h"
#include "support/temp_dir.h"

namespace ds2 {
namespace {

std::vector<float> test_tone(int n, int rate, float amplitude = 0.5f) {
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = amplitude * std::sin(2.0 * M_PI * 440.0 * i / rate);
  return x;
}

// Asserts that `fn` throws ds2::Error whose one-line message is "PATH: ...needle...".
template <typename Fn>
void expect_audio_error(Fn fn, const std::string& path, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error for " << path;
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
    EXPECT_NE(message.find(needle), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

size_t count_files(const std::filesystem::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

TEST(AudioIo, Pcm16WavRoundTripAndProbe) {
  TempDir dir;
  const std::string path = dir.file("tone.wav");
  const std::vector<float> tone = test_tone(16000, 16000);
  write_audio(path, tone, 16000);

  const AudioInfo info = probe_audio(path);
  EXPECT_EQ(info.frames, 16000);
  EXPECT_EQ(info.sample_rate, 16000);
  EXPECT_EQ(info.channels, 1);
  EXPECT_DOUBLE_EQ(info.duration_s, 1.0);
  EXPECT_EQ(info.format, "wav");
  EXPECT_EQ(info.encoding, "pcm16");
  EXPECT_EQ(std::filesystem::file_size(path), 44u + 2u * 16000u);

  int rate = 0;
  const std::vector<float> back = read_audio(path, &rate);
  EXPECT_EQ(rate, 16000);
  ASSERT_EQ(back.size(), tone.size());
  for (size_t i = 0; i < tone.size(); ++i) ASSERT_NEAR(back[i], tone[i], 1.0 / 32768) << i;
  EXPECT_EQ(count_files(dir.path()), 1u);  // no temporary left behind
}

TEST(AudioIo, Pcm24AndFloatWavRoundTrip) {
  TempDir dir;
  const std::vector<float> tone = test_tone(4000, 8000, 0.9f);
  write_audio(dir.file("a24.wav"), tone, 8000, AudioEncoding::kPcm24);
  write_audio(dir.file("af.wav"), tone, 8000, AudioEncoding::kFloat32);
  EXPECT_EQ(probe_audio(dir.file("a24.wav")).encoding, "pcm24");
  EXPECT_EQ(probe_audio(dir.file("af.wav")).encoding, "float32");

  const std::vector<float> back24 = read_audio(dir.file("a24.wav"), nullptr);
  const std::vector<float> back_float = read_audio(dir.file("af.wav"), nullptr);
  ASSERT_EQ(back24.size(), tone.size());
  ASSERT_EQ(back_float.size(), tone.size());
  for (size_t i = 0; i < tone.size(); ++i) {
    ASSERT_NEAR(back24[i], tone[i], 1.0 / (1 << 23)) << i;
    ASSERT_EQ(back_float[i], tone[i]) << i;
  }
}

TEST(AudioIo, FlacRoundTrip) {
  TempDir dir;
  const std::string path = dir.file("tone.flac");
  const std::vector<float> tone = test_tone(12345, 16000);
  write_audio(path, tone, 16000);
  const AudioInfo info = probe_audio(path);
  EXPECT_EQ(info.format, "flac");
  EXPECT_EQ(info.frames, 12345);
  int rate = 0;
  const std::vector<float> back = read_audio(path, &rate);
  EXPECT_EQ(rate, 16000);
  ASSERT_EQ(back.size(), tone.size());
  for (size_t i = 0; i < tone.size(); ++i) ASSERT_NEAR(back[i], tone[i], 1.0 / 32768) << i;
}

TEST(AudioIo, StereoInt16IsAveragedToMono) {
  TempDir dir;
  const std::string path = dir.file("stereo.wav");
  SF_INFO info{};
  info.samplerate = 8000;
  info.channels = 2;
  info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
  SNDFILE* file = sf_open(path.c_str(), SFM_WRITE, &info);
  ASSERT_NE(file, nullptr);
  const short interleaved[] = {1000, -3000, 32767, 32767, -32768, 0, 7, 9};
  ASSERT_EQ(sf_writef_short(file, interleaved, 4), 4);
  sf_close(file);

  EXPECT_EQ(probe_audio(path).channels, 2);
  const std::vector<float> mono = read_audio(path, nullptr);
  ASSERT_EQ(mono.size(), 4u);
  EXPECT_FLOAT_EQ(mono[0], -1000.0f / 32768);
  EXPECT_FLOAT_EQ(mono[1], 32767.0f / 32768);
  EXPECT_FLOAT_EQ(mono[2], -0.5f);
  EXPECT_FLOAT_EQ(mono[3], 8.0f / 32768);
}

TEST(AudioIo, FloatSamplesBeyondFullScaleAreClampedAndNanRejected) {
  TempDir dir;
  write_audio(dir.file("loud.wav"), {1.5f, -2.0f, 0.25f}, 8000, AudioEncoding::kFloat32);
  EXPECT_EQ(read_audio(dir.file("loud.wav"), nullptr), (std::vector<float>{1.0f, -1.0f, 0.25f}));

  const std::string nan_path = dir.file("nan.wav");
  write_audio(nan_path, {0.1f, std::numeric_limits<float>::quiet_NaN()}, 8000,
              AudioEncoding::kFloat32);
  expect_audio_error([&] { read_audio(nan_path, nullptr); }, nan_path, "NaN");
}

TEST(AudioIo, WritingClipsInsteadOfWrapping) {
  TempDir dir;
  write_audio(dir.file("clip.wav"), {1.5f, -1.5f}, 8000);
  const std::vector<float> back = read_audio(dir.file("clip.wav"), nullptr);
  EXPECT_FLOAT_EQ(back[0], 32767.0f / 32768);
  EXPECT_FLOAT_EQ(back[1], -1.0f);
}

TEST(AudioIo, WriteReplacesExistingFileAtomically) {
  TempDir dir;
  const std::string path = dir.file("a.wav");
  write_audio(path, test_tone(800, 8000), 8000);
  write_audio(path, {0.5f, -0.25f}, 8000);
  EXPECT_EQ(read_audio(path, nullptr), (std::vector<float>{0.5f, -0.25f}));
  EXPECT_EQ(count_files(dir.path()), 1u);
}

TEST(AudioIo, WriteRejectsUnknownExtensionAndFloatFlac) {
  TempDir dir;
  const std::string mp3 = dir.file("a.mp3");
  expect_audio_error([&] { write_audio(mp3, {0.0f}, 8000); }, mp3, "extension");
  const std::string flac = dir.file("a.flac");
  expect_audio_error([&] { write_audio(flac, {0.0f}, 8000, AudioEncoding::kFloat32); }, flac,
                     "integer");
  EXPECT_EQ(count_files(dir.path()), 0u);
}

TEST(AudioIo, MissingFileIsAnError) {
  TempDir dir;
  const std::string path = dir.file("nope.wav");
  expect_audio_error([&] { read_audio(path, nullptr); }, path, "no such file");
  expect_audio_error([&] { probe_audio(path); }, path, "no such file");
  expect_audio_error([&] { read_audio(dir.path().string(), nullptr); }, dir.path().string(),
                     "directory");
}

TEST(AudioIo, GarbageBytesAreAnError) {
  TempDir dir;
  const std::string path = dir.file("garbage.wav");
  std::string bytes;
  for (int i = 0; i < 5000; ++i) bytes.push_back(static_cast<char>((i * 7919 + 13) % 251));
  write_bytes(path, bytes);
  expect_audio_error([&] { read_audio(path, nullptr); }, path, "cannot decode");
  expect_audio_error([&] { probe_audio(path); }, path, "cannot decode");
}

TEST(AudioIo, ZeroFrameWavIsAnError) {
  TempDir dir;
  const std::string path = dir.file("empty.wav");
  write_audio(path, {}, 16000);
  EXPECT_EQ(std::filesystem::file_size(path), 44u);
  expect_audio_error([&] { read_audio(path, nullptr); }, path, "empty");
  expect_audio_error([&] { probe_audio(path); }, path, "empty");
}

TEST(AudioIo, TruncatedWavIsAnError) {
  TempDir dir;
  const std::string path = dir.file("cut.wav");
  write_audio(path, test_tone(16000, 16000), 16000);
  // Cut mid-sample, well inside the data chunk: libsndfile alone would decode 5000 frames.
  std::filesystem::resize_file(path, 44 + 10001);
  expect_audio_error([&] { read_audio(path, nullptr); }, path, "truncated");
  expect_audio_error([&] { probe_audio(path); }, path, "truncated");

  // Cut inside the header.
  std::filesystem::resize_file(path, 30);
  expect_audio_error([&] { read_audio(path, nullptr); }, path, "cannot decode");
}

TEST(AudioIo, TruncatedFlacIsAnError) {
  TempDir dir;
  const std::string path = dir.file("cut.flac");
  std::vector<float> noise(16000);
  Rng rng(5);
  for (float& s : noise) s = rng.uniform(-0.5f, 0.5f);  // incompressible, so the file is long
  write_audio(path, noise, 16000);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  expect_audio_error([&] { read_audio(path, nullptr); }, path, "truncated");
}

}  // namespace
}  // namespace ds2
