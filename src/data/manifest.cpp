#include "data/manifest.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/utf8.h"

namespace ds2 {
namespace {

namespace fs = std::filesystem;

bool is_blank(const std::string& line) {
  return line.find_first_not_of(" \t\r\n\v\f") == std::string::npos;
}

// Strips what editors and Windows tools add but JSON does not allow: a UTF-8 byte-order mark on
// the first line and the '\r' of CRLF line ends.
void strip_line_noise(std::string* line, int line_number) {
  if (line_number == 1 && line->compare(0, 3, "\xEF\xBB\xBF") == 0) line->erase(0, 3);
  if (!line->empty() && line->back() == '\r') line->pop_back();
}

std::string resolve_audio_path(const fs::path& manifest_dir, const std::string& audio) {
  fs::path audio_path(audio);
  if (audio_path.is_absolute() || manifest_dir.empty()) return audio_path.lexically_normal();
  return (manifest_dir / audio_path).lexically_normal();
}

// Returns the string value of `key`, or sets *reason when it is missing or not a string.
const std::string* string_field(const nlohmann::json& entry, const char* key, std::string* reason) {
  auto it = entry.find(key);
  if (it == entry.end()) {
    *reason = std::string("missing key '") + key + "'";
    return nullptr;
  }
  if (!it->is_string()) {
    *reason = std::string("key '") + key + "' must be a string, got " + it->type_name();
    return nullptr;
  }
  return it->get_ptr<const std::string*>();
}

// Parses one non-blank line into *utt; returns an empty string on success, else the reason.
std::string parse_entry(const std::string& line, const fs::path& manifest_dir, Utterance* utt) {
  nlohmann::json entry;
  // nlohmann::json keeps the last of repeated keys; a line that says two things is rejected.
  std::unordered_set<std::string> keys;
  std::string repeated_key;
  const auto find_repeated_key = [&](int depth, nlohmann::json::parse_event_t event,
                                     nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && repeated_key.empty() &&
        !keys.insert(parsed.get<std::string>()).second) {
      repeated_key = parsed.get<std::string>();
    }
    return true;
  };
  try {
    entry = nlohmann::json::parse(line, find_repeated_key);
  } catch (const nlohmann::json::parse_error& e) {
    return "invalid JSON at column " + std::to_string(e.byte);
  } catch (const nlohmann::json::out_of_range&) {
    return "invalid JSON: a number is too large for a double";  // e.g. "duration": 1e999
  }
  if (!entry.is_object()) return std::string("expected a JSON object, got ") + entry.type_name();
  if (!repeated_key.empty()) return "repeated key '" + printable(repeated_key) + "'";

  std::string reason;
  const std::string* audio = string_field(entry, "audio_filepath", &reason);
  if (audio == nullptr) return reason;
  if (audio->empty()) return "empty 'audio_filepath'";
  const std::string* text = string_field(entry, "text", &reason);
  if (text == nullptr) return reason;

  auto duration = entry.find("duration");
  if (duration == entry.end()) return "missing key 'duration'";
  if (!duration->is_number()) {
    return std::string("key 'duration' must be a number, got ") + duration->type_name();
  }
  const double seconds = duration->get<double>();
  if (!std::isfinite(seconds)) return "duration is not finite";
  if (seconds < 0) {
    std::ostringstream message;
    message << "negative duration " << seconds;
    return message.str();
  }

  for (const char* id_key : {"id", "utterance_id"}) {
    if (!entry.contains(id_key)) continue;
    const std::string* id = string_field(entry, id_key, &reason);
    if (id == nullptr) return reason;
    if (id->empty()) return std::string("empty '") + id_key + "'";
    // Ids go into line-oriented outputs (problem lists, sclite .trn files).
    for (unsigned char c : *id) {
      if (c < 0x20 || c == 0x7F) {
        return std::string("key '") + id_key + "' contains a control character: '" +
               printable(*id) + "'";
      }
    }
    utt->id = *id;
    break;
  }
  if (entry.contains("speaker")) {
    const std::string* speaker = string_field(entry, "speaker", &reason);
    if (speaker == nullptr) return reason;
    if (speaker->empty()) return "empty 'speaker'";
    utt->speaker = *speaker;
  }
  if (utt->id.empty()) utt->id = fs::path(*audio).stem().string() + "@" + std::to_string(utt->line);
  utt->audio_path = resolve_audio_path(manifest_dir, *audio);
  utt->duration_s = seconds;
  utt->text = *text;
  return "";
}

// The audio path to write into a manifest in `manifest_dir` so that reading it back resolves to
// `audio_path` again.
std::string path_for_manifest(const std::string& audio_path, const fs::path& manifest_dir) {
  fs::path audio(audio_path);
  if (audio.is_absolute()) return audio.lexically_normal();
  const fs::path absolute_audio = fs::absolute(audio).lexically_normal();
  const fs::path absolute_dir = fs::absolute(manifest_dir).lexically_normal();
  const fs::path relative = absolute_audio.lexically_relative(absolute_dir);
  return relative.empty() ? absolute_audio.string() : relative.string();
}

}  // namespace

std::vector<Utterance> read_manifest(const std::string& path, std::vector<std::string>* problems) {
  std::ifstream in(path, std::ios::binary);
  DS2_CHECK(in, "cannot open manifest '" << path << "'");
  return read_manifest(in, path, problems);
}

std::vector<Utterance> read_manifest(std::istream& in, const std::string& path,
                                     std::vector<std::string>* problems) {
  const fs::path manifest_dir = fs::path(path).parent_path();

  std::vector<Utterance> utterances;
  std::unordered_map<std::string, int> line_of_id;
  std::string line;
  for (int line_number = 1; std::getline(in, line); ++line_number) {
    strip_line_noise(&line, line_number);
    if (is_blank(line)) continue;
    Utterance utt;
    utt.manifest = path;
    utt.line = line_number;
    std::string reason = parse_entry(line, manifest_dir, &utt);
    if (reason.empty()) {
      auto [it, inserted] = line_of_id.emplace(utt.id, line_number);
      if (!inserted) {
        reason = "repeated id '" + printable(utt.id) + "' (first at line " +
                 std::to_string(it->second) + ")";
      }
    }
    if (!reason.empty()) {
      std::string problem = path + ":" + std::to_string(line_number) + ": " + reason;
      if (problems == nullptr) throw Error(problem);
      problems->push_back(std::move(problem));
      continue;
    }
    utterances.push_back(std::move(utt));
  }
  DS2_CHECK(!in.bad(), "error reading manifest '" << path << "'");
  return utterances;
}

void write_manifest(const std::string& path, const std::vector<Utterance>& utterances) {
  const fs::path manifest_dir = fs::path(path).parent_path();
  std::string contents;
  for (const Utterance& utt : utterances) {
    DS2_CHECK(utt.duration_s >= 0, "cannot write utterance '"
                                       << utt.id << "' to " << path
                                       << ": its duration is unknown; measure it first");
    nlohmann::ordered_json entry;
    entry["id"] = utt.id;
    entry["audio_filepath"] = path_for_manifest(utt.audio_path, manifest_dir);
    entry["duration"] = utt.duration_s;
    entry["text"] = utt.text;
    if (!utt.speaker.empty()) entry["speaker"] = utt.speaker;
    try {
      contents += entry.dump();
    } catch (const nlohmann::json::type_error&) {
      DS2_FAIL("cannot write utterance '" << utt.id << "' to " << path
                                          << ": its id, path or text is not valid UTF-8");
    }
    contents += '\n';
  }

  write_file_atomic(path, contents);
}

std::vector<std::string> manifest_audio_paths(const std::string& manifest) {
  std::ifstream in(manifest);
  DS2_CHECK(in, manifest << ": cannot open manifest");
  const std::filesystem::path dir = std::filesystem::path(manifest).parent_path();
  std::vector<std::string> paths;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line_no == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
    if (line.find_first_not_of(" \t\r\n\v\f") == std::string::npos) continue;
    nlohmann::json entry;
    try {
      entry = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      DS2_FAIL(manifest << ":" << line_no << ": invalid JSON at column " << e.byte);
    }
    DS2_CHECK(entry.is_object() && entry.contains("audio_filepath") &&
                  entry["audio_filepath"].is_string(),
              manifest << ":" << line_no << ": expected an object with a string 'audio_filepath'");
    const std::filesystem::path audio(entry["audio_filepath"].get<std::string>());
    paths.push_back(audio.is_absolute() || dir.empty() ? audio.lexically_normal().string()
                                                       : (dir / audio).lexically_normal().string());
  }
  return paths;
}

}  // namespace ds2
