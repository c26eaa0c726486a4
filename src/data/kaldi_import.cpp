#include "data/kaldi_import.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"

namespace ds2 {
namespace {

namespace fs = std::filesystem;

constexpr const char* kWhitespace = " \t\r\n\v\f";

// One "<key> <value>" line of a Kaldi table file.
struct TableEntry {
  std::string key;
  std::string value;  // the rest of the line, trimmed; may be empty
  int line = 0;
};

class ProblemSink {
 public:
  explicit ProblemSink(std::vector<std::string>* problems) : problems_(problems) {}
  void report(const std::string& file, int line, const std::string& reason) {
    std::string problem = file + ":" + std::to_string(line) + ": " + reason;
    if (problems_ == nullptr) throw Error(problem);
    problems_->push_back(std::move(problem));
  }

 private:
  std::vector<std::string>* problems_;
};

// Reads a Kaldi table file, skipping blank lines and reporting repeated keys (the first wins).
std::vector<TableEntry> read_table(const std::string& path, ProblemSink* sink) {
  std::ifstream in(path, std::ios::binary);
  DS2_CHECK(in, "cannot open '" << path << "'");
  std::vector<TableEntry> entries;
  std::unordered_map<std::string, int> line_of_key;
  std::string line;
  for (int line_number = 1; std::getline(in, line); ++line_number) {
    const size_t key_begin = line.find_first_not_of(kWhitespace);
    if (key_begin == std::string::npos) continue;
    const size_t key_end = std::min(line.find_first_of(kWhitespace, key_begin), line.size());
    TableEntry entry;
    entry.key = line.substr(key_begin, key_end - key_begin);
    entry.line = line_number;
    const size_t value_begin = line.find_first_not_of(kWhitespace, key_end);
    if (value_begin != std::string::npos) {
      const size_t value_end = line.find_last_not_of(kWhitespace);
      entry.value = line.substr(value_begin, value_end + 1 - value_begin);
    }
    auto [it, inserted] = line_of_key.emplace(entry.key, line_number);
    if (!inserted) {
      sink->report(path, line_number,
                   "repeated utterance id '" + entry.key + "' (first at line " +
                       std::to_string(it->second) + ")");
      continue;
    }
    entries.push_back(std::move(entry));
  }
  DS2_CHECK(!in.bad(), "error reading '" << path << "'");
  return entries;
}

bool is_archive_offset(const std::string& rxfilename) {
  const size_t colon = rxfilename.rfind(':');
  if (colon == std::string::npos || colon + 1 == rxfilename.size()) return false;
  return rxfilename.find_first_not_of("0123456789", colon + 1) == std::string::npos;
}

// Why Kaldi's wav.scp value cannot be read as a plain audio file, or "" when it can.
std::string unsupported_audio_reason(const std::string& rxfilename) {
  if (rxfilename.empty()) return "expected '<utterance-id> <audio path>'";
  if (rxfilename.back() == '|') {
    return "piped command '" + rxfilename +
           "' is not supported; convert the audio to files and list their paths";
  }
  if (rxfilename == "-") return "reading audio from standard input is not supported";
  if (is_archive_offset(rxfilename)) {
    return "archive offset '" + rxfilename + "' is not supported; list audio files instead";
  }
  return "";
}

}  // namespace

std::vector<Utterance> import_kaldi_dir(const std::string& dir,
                                        std::vector<std::string>* problems) {
  ProblemSink sink(problems);
  const std::string wav_scp = (fs::path(dir) / "wav.scp").string();
  const std::string text_path = (fs::path(dir) / "text").string();
  const std::string segments = (fs::path(dir) / "segments").string();
  DS2_CHECK(fs::exists(wav_scp), "Kaldi directory '" << dir << "' has no wav.scp");
  DS2_CHECK(fs::exists(text_path), "Kaldi directory '" << dir << "' has no text file");
  if (fs::exists(segments)) {
    sink.report(segments, 1,
                "segments files are not supported (wav.scp then lists recordings, not "
                "utterances); cut the segments into audio files first");
    return {};
  }

  const std::vector<TableEntry> audio_entries = read_table(wav_scp, &sink);
  const std::vector<TableEntry> text_entries = read_table(text_path, &sink);
  std::unordered_map<std::string, const TableEntry*> text_of;
  for (const TableEntry& entry : text_entries) text_of.emplace(entry.key, &entry);

  std::vector<Utterance> utterances;
  std::unordered_set<std::string> ids_with_audio;
  for (const TableEntry& audio : audio_entries) {
    ids_with_audio.insert(audio.key);
    const std::string reason = unsupported_audio_reason(audio.value);
    if (!reason.empty()) {
      sink.report(wav_scp, audio.line, "utterance '" + audio.key + "': " + reason);
      continue;
    }
    auto text = text_of.find(audio.key);
    if (text == text_of.end()) {
      sink.report(wav_scp, audio.line,
                  "utterance '" + audio.key + "' has no transcript in " + text_path);
      continue;
    }
    Utterance utt;
    utt.id = audio.key;
    utt.audio_path = audio.value;
    utt.duration_s = kUnknownDuration;
    utt.text = text->second->value;
    utt.manifest = wav_scp;
    utt.line = audio.line;
    utterances.push_back(std::move(utt));
  }
  for (const TableEntry& text : text_entries) {
    if (ids_with_audio.count(text.key) == 0) {
      sink.report(text_path, text.line, "utterance '" + text.key + "' has no audio in " + wav_scp);
    }
  }
  return utterances;
}

}  // namespace ds2
