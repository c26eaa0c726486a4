#include "audio/audio_io.h"

#include <sndfile.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <system_error>
#include <thread>

#include "core/error.h"

namespace ds2 {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kReadBlockFrames = 8192;

struct SndfileCloser {
  void operator()(SNDFILE* file) const { sf_close(file); }
};
using SndfilePtr = std::unique_ptr<SNDFILE, SndfileCloser>;

std::string single_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  while (!text.empty() && (text.back() == ' ' || text.back() == '.')) text.pop_back();
  return text;
}

uint32_t read_le32(const unsigned char* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

// libsndfile quietly shrinks a WAV data chunk that claims more bytes than the file holds, so a
// truncated download would decode as a shorter, valid-looking utterance. Walk the RIFF chunks
// ourselves and compare. Streaming writers put 0 or 0xFFFFFFFF in the size; those are accepted.
void check_wav_data_chunk(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::error_code ec;
  const uint64_t file_size = fs::file_size(path, ec);
  if (!in || ec) return;  // libsndfile already opened it; nothing more to learn here
  unsigned char header[12];
  if (!in.read(reinterpret_cast<char*>(header), sizeof(header))) return;
  if (std::string(reinterpret_cast<char*>(header), 4) != "RIFF" ||
      std::string(reinterpret_cast<char*>(header) + 8, 4) != "WAVE") {
    return;  // RF64 and friends keep 64-bit sizes elsewhere; rely on the frame-count check
  }
  uint64_t offset = 12;
  for (int chunk = 0; chunk < 4096 && offset + 8 <= file_size; ++chunk) {
    unsigned char chunk_header[8];
    in.seekg(static_cast<std::streamoff>(offset));
    if (!in.read(reinterpret_cast<char*>(chunk_header), sizeof(chunk_header))) return;
    const uint32_t size = read_le32(chunk_header + 4);
    if (std::string(reinterpret_cast<char*>(chunk_header), 4) == "data") {
      const uint64_t available = file_size - offset - 8;
      DS2_CHECK(size == 0 || size == 0xFFFFFFFFu || size <= available,
                path << ": truncated WAV: data chunk declares " << size << " bytes but only "
                     << available << " are present");
      return;
    }
    offset += 8 + uint64_t(size) + (size & 1u);
  }
}

std::string format_name(int format) {
  switch (format & SF_FORMAT_TYPEMASK) {
    case SF_FORMAT_WAV:
    case SF_FORMAT_WAVEX:
      return "wav";
    case SF_FORMAT_RF64:
      return "rf64";
    case SF_FORMAT_FLAC:
      return "flac";
    case SF_FORMAT_OGG:
      return "ogg";
    case SF_FORMAT_AIFF:
      return "aiff";
    case SF_FORMAT_MPEG:
      return "mp3";
    default:
      break;
  }
  SF_FORMAT_INFO info{};
  info.format = format & SF_FORMAT_TYPEMASK;
  if (sf_command(nullptr, SFC_GET_FORMAT_INFO, &info, sizeof(info)) == 0 && info.extension) {
    return info.extension;
  }
  return "unknown";
}

std::string encoding_name(int format) {
  switch (format & SF_FORMAT_SUBMASK) {
    case SF_FORMAT_PCM_S8:
    case SF_FORMAT_PCM_U8:
      return "pcm8";
    case SF_FORMAT_PCM_16:
      return "pcm16";
    case SF_FORMAT_PCM_24:
      return "pcm24";
    case SF_FORMAT_PCM_32:
      return "pcm32";
    case SF_FORMAT_FLOAT:
      return "float32";
    case SF_FORMAT_DOUBLE:
      return "float64";
    case SF_FORMAT_ULAW:
      return "ulaw";
    case SF_FORMAT_ALAW:
      return "alaw";
    case SF_FORMAT_VORBIS:
      return "vorbis";
    case SF_FORMAT_OPUS:
      return "opus";
    default:
      return "other";
  }
}

// Opens `path` for reading and validates the header; `info` receives it.
SndfilePtr open_for_reading(const std::string& path, SF_INFO& info) {
  {
    // Our own check gives a precise reason; libsndfile only reports "System error".
    std::error_code ec;
    const auto status = fs::status(path, ec);
    DS2_CHECK(fs::exists(status), path << ": no such file");
    DS2_CHECK(!fs::is_directory(status), path << ": is a directory, not an audio file");
    std::ifstream probe(path, std::ios::binary);
    DS2_CHECK(probe.good(), path << ": cannot open for reading (permission denied?)");
  }
  info = SF_INFO{};
  SndfilePtr file(sf_open(path.c_str(), SFM_READ, &info));
  if (!file) {
    // sf_strerror(nullptr) reads a shared buffer that concurrent loader threads may be writing;
    // the error number maps to a constant string instead.
    DS2_FAIL(path << ": cannot decode audio: " << single_line(sf_error_number(sf_error(nullptr))));
  }
  DS2_CHECK(info.samplerate > 0, path << ": invalid sample rate " << info.samplerate);
  DS2_CHECK(info.channels > 0, path << ": invalid channel count " << info.channels);
  DS2_CHECK(info.frames > 0, path << ": no audio frames (empty file)");
  const int major = info.format & SF_FORMAT_TYPEMASK;
  if (major == SF_FORMAT_WAV || major == SF_FORMAT_WAVEX) check_wav_data_chunk(path);
  return file;
}

float clamp_sample(float value) {
  return std::min(1.0f, std::max(-1.0f, value));
}

int sndfile_format_for(const std::string& path, AudioEncoding encoding) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  int subtype = 0;
  switch (encoding) {
    case AudioEncoding::kPcm16:
      subtype = SF_FORMAT_PCM_16;
      break;
    case AudioEncoding::kPcm24:
      subtype = SF_FORMAT_PCM_24;
      break;
    case AudioEncoding::kFloat32:
      subtype = SF_FORMAT_FLOAT;
      break;
  }
  if (ext == ".wav") return SF_FORMAT_WAV | subtype;
  if (ext == ".flac") {
    DS2_CHECK(encoding != AudioEncoding::kFloat32,
              path << ": FLAC stores integer samples only; use pcm16 or pcm24");
    return SF_FORMAT_FLAC | subtype;
  }
  DS2_FAIL(path << ": cannot choose an audio format from extension '" << ext
                << "' (expected .wav or .flac)");
}

std::string temporary_sibling(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  const size_t thread_hash = std::hash<std::thread::id>()(std::this_thread::get_id());
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(thread_hash % 100000) +
         "." + std::to_string(counter++);
}

}  // namespace

AudioInfo probe_audio(const std::string& path) {
  SF_INFO sf_info;
  SndfilePtr file = open_for_reading(path, sf_info);
  AudioInfo info;
  info.frames = sf_info.frames;
  info.sample_rate = sf_info.samplerate;
  info.channels = sf_info.channels;
  info.duration_s = static_cast<double>(sf_info.frames) / sf_info.samplerate;
  info.format = format_name(sf_info.format);
  info.encoding = encoding_name(sf_info.format);
  return info;
}

std::vector<float> read_audio(const std::string& path, int* sample_rate_out) {
  SF_INFO info;
  SndfilePtr file = open_for_reading(path, info);
  const int channels = info.channels;
  std::vector<float> mono;
  // The header's frame count is not trusted with a huge up-front allocation.
  mono.reserve(static_cast<size_t>(std::min<int64_t>(info.frames, int64_t{1} << 26)));
  std::vector<float> block(static_cast<size_t>(kReadBlockFrames * channels));
  const float inv_channels = 1.0f / static_cast<float>(channels);
  bool non_finite = false;
  while (true) {
    const sf_count_t got = sf_readf_float(file.get(), block.data(), kReadBlockFrames);
    if (got <= 0) break;
    for (sf_count_t f = 0; f < got; ++f) {
      const float* frame = block.data() + f * channels;
      float sum = 0.0f;
      for (int c = 0; c < channels; ++c) sum += frame[c];
      const float value = channels == 1 ? sum : sum * inv_channels;
      non_finite |= !std::isfinite(value);
      mono.push_back(clamp_sample(value));
    }
  }
  const int error = sf_error(file.get());
  DS2_CHECK(error == SF_ERR_NO_ERROR, path << ": decoding failed after " << mono.size()
                                           << " frames: " << single_line(sf_error_number(error)));
  DS2_CHECK(static_cast<int64_t>(mono.size()) == info.frames,
            path << ": truncated: header promises " << info.frames << " frames but only "
                 << mono.size() << " could be decoded");
  DS2_CHECK(!non_finite, path << ": contains NaN or infinite samples");
  if (sample_rate_out) *sample_rate_out = info.samplerate;
  return mono;
}

void write_audio(const std::string& path, const std::vector<float>& mono, int sample_rate,
                 AudioEncoding encoding) {
  DS2_CHECK(sample_rate > 0, path << ": cannot write audio at sample rate " << sample_rate);
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = 1;
  info.format = sndfile_format_for(path, encoding);
  DS2_CHECK(sf_format_check(&info), path << ": libsndfile cannot write this format");

  const std::string temp = temporary_sibling(path);
  auto remove_temp = [&temp] {
    std::error_code ignored;
    fs::remove(temp, ignored);
  };
  {
    SndfilePtr file(sf_open(temp.c_str(), SFM_WRITE, &info));
    DS2_CHECK(file, path << ": cannot create " << temp << ": "
                         << single_line(sf_error_number(sf_error(nullptr))));
    // Without clipping, floats beyond full scale wrap around to the opposite sign.
    sf_command(file.get(), SFC_SET_CLIPPING, nullptr, SF_TRUE);
    const sf_count_t written =
        sf_writef_float(file.get(), mono.data(), static_cast<sf_count_t>(mono.size()));
    if (written != static_cast<sf_count_t>(mono.size())) {
      const std::string reason = single_line(sf_strerror(file.get()));
      file.reset();
      remove_temp();
      DS2_FAIL(path << ": writing failed: " << reason);
    }
    if (sf_close(file.release()) != 0) {
      remove_temp();
      DS2_FAIL(path << ": writing failed when closing the file");
    }
  }
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) {
    remove_temp();
    DS2_FAIL(path << ": cannot move the finished file into place: " << ec.message());
  }
}

}  // namespace ds2
