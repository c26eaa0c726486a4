// Fuzz targets for the config loader (see fuzz_targets.h), and the shared helpers.
#include <string>

#include "core/error.h"
#include "fuzz/fuzz_targets.h"
#include "train/config.h"

namespace ds2::fuzz {
namespace {

constexpr const char* kSource = "fuzz.yaml";

// A config that loaded must load again from its resolved YAML, to the same resolved YAML: that
// text is what runs and checkpoints save and what `ds2 eval` reads back.
void check_round_trip(const Config& cfg, const char* target) {
  std::string again;
  try {
    again = parse_config(cfg.resolved_yaml, {}, "resolved.yaml").resolved_yaml;
  } catch (const Error& e) {
    throw PropertyViolation(std::string(target) +
                            ": the resolved config does not load back: " + e.what());
  }
  if (again != cfg.resolved_yaml) {
    throw PropertyViolation(std::string(target) +
                            ": the resolved config changes when loaded back:\n" +
                            cfg.resolved_yaml + "---\n" + again);
  }
}

}  // namespace

void check_error_message(const std::string& message, const std::string& prefix,
                         const char* target) {
  if (message.empty() || message.find_first_of("\n\r") != std::string::npos ||
      message.compare(0, prefix.size(), prefix) != 0) {
    throw PropertyViolation(std::string(target) +
                            ": error message is not one line starting with '" + prefix +
                            "': " + message);
  }
}

int fuzz_config_one(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    check_round_trip(parse_config(text, {}, kSource), "config");
  } catch (const Error& e) {
    check_error_message(e.what(), kSource, "config");
  }
  return 0;
}

int fuzz_override_one(const uint8_t* data, size_t size) {
  static const std::string kBase =
      "run:\n  dir: runs/fuzz\ndata:\n  train_manifest: train.jsonl\n"
      "model:\n  conv: [{channels: 4, kernel: [5, 5], stride: [2, 2]}]\n  rnn_hidden: 16\n";
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    overrides.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  try {
    check_round_trip(parse_config(kBase, overrides, kSource), "override");
  } catch (const Error& e) {
    // Override errors name the override ("override 'key=value': ..."); the rest the source.
    const std::string message = e.what();
    const bool names_override = message.rfind("override '", 0) == 0;
    check_error_message(message, names_override ? "override '" : kSource, "override");
  }
  return 0;
}

const std::vector<FuzzTarget>& fuzz_targets() {
  static const std::vector<FuzzTarget> targets = {{"config", fuzz_config_one},
                                                  {"override", fuzz_override_one},
                                                  {"manifest", fuzz_manifest_one},
                                                  {"audio", fuzz_audio_one}};
  return targets;
}

}  // namespace ds2::fuzz
