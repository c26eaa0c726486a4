// Fuzz target for the JSON-lines manifest reader (see fuzz_targets.h).
#include <cmath>
#include <sstream>
#include <string>
#include <unordered_set>

#include "core/error.h"
#include "data/manifest.h"
#include "fuzz/fuzz_targets.h"

namespace ds2::fuzz {
namespace {

constexpr const char* kPath = "/fuzz/corpus/m.jsonl";

void violation(const std::string& what) {
  throw PropertyViolation("manifest: " + what);
}

}  // namespace

int fuzz_manifest_one(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> problems;
  std::vector<Utterance> utts;
  try {
    std::istringstream in(text);
    utts = read_manifest(in, kPath, &problems);
  } catch (const Error& e) {
    // With a list of problems, reading from memory has nothing left to fail on.
    violation(std::string("threw although problems are collected: ") + e.what());
  }
  const std::string prefix = std::string(kPath) + ":";
  for (const std::string& p : problems) check_error_message(p, prefix, "manifest");

  std::unordered_set<std::string> ids;
  int last_line = 0;
  for (const Utterance& u : utts) {
    if (u.id.empty() || !ids.insert(u.id).second) violation("empty or repeated id '" + u.id + "'");
    if (u.audio_path.empty()) violation("empty audio path for '" + u.id + "'");
    if (!std::isfinite(u.duration_s) || u.duration_s < 0) violation("bad duration for " + u.id);
    if (u.line <= last_line || u.manifest != kPath) violation("bad line/manifest for " + u.id);
    last_line = u.line;
  }

  // Without a list, the first problem is thrown instead, and a clean manifest reads the same.
  try {
    std::istringstream in(text);
    const std::vector<Utterance> again = read_manifest(in, kPath, nullptr);
    if (!problems.empty()) violation("no error without a problem list; expected " + problems[0]);
    if (again.size() != utts.size()) violation("different utterances without a problem list");
  } catch (const Error& e) {
    if (problems.empty() || problems[0] != e.what()) {
      violation(std::string("unexpected error without a problem list: ") + e.what());
    }
  }
  return 0;
}

}  // namespace ds2::fuzz
