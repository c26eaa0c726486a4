#include "data/dataset.h"

#include <atomic>
#include <cmath>
#include <sstream>
#include <thread>

#include "audio/audio_io.h"
#include "core/error.h"
#include "ctc/ctc_loss.h"

namespace ds2 {

double Dataset::hours() const {
  double s = 0;
  for (const auto& e : examples) s += e.duration_s;
  return s / 3600.0;
}

std::string describe_problem(const Utterance& utt, const std::string& reason) {
  std::ostringstream out;
  out << utt.manifest << ":" << utt.line << ": " << utt.id << ": " << reason;
  return out.str();
}

std::string check_utterance(const Utterance& utt, const DatasetChecks& checks, Example* example) {
  const DataConfig& cfg = checks.data;
  TextNormalization norm;
  norm.digits = parse_digits_policy(cfg.digits);
  std::vector<int> labels;
  if (checks.transcribed) {
    std::string bad;
    labels = checks.alphabet.encode(normalize_text(utt.text, norm), &bad);
    if (!bad.empty()) return "characters outside the alphabet: \"" + bad + "\"";
    if (labels.empty()) return "empty transcript";
  }

  AudioInfo info;
  std::vector<float> samples;
  try {
    info = probe_audio(utt.audio_path);
    // Decoding in full is what catches truncated files and bad data past the header.
    samples = checks.featurizer.load_samples(utt.audio_path);
  } catch (const Error& e) {
    return e.what();
  }
  std::ostringstream why;
  if (info.sample_rate <= 0) return "invalid sample rate";
  const double seconds = info.duration_s;
  if (utt.duration_s >= 0 && std::fabs(seconds - utt.duration_s) > cfg.duration_tolerance_s) {
    why << "duration " << seconds << " s in the audio but " << utt.duration_s
        << " s in the manifest";
    return why.str();
  }
  if (seconds < cfg.min_duration_s) {
    why << "too short: " << seconds << " s < data.min_duration_s " << cfg.min_duration_s;
    return why.str();
  }
  if (seconds > cfg.max_duration_s) {
    why << "too long: " << seconds << " s > data.max_duration_s " << cfg.max_duration_s;
    return why.str();
  }
  const int64_t frames = checks.featurizer.frames_for_duration(static_cast<double>(samples.size()) /
                                                               checks.featurizer.sample_rate());
  const int out_frames = checks.output_length(static_cast<int>(frames));
  const int needed = ctc_min_frames(labels);
  if (out_frames < needed) {
    why << "CTC-infeasible: " << out_frames << " output frames for " << labels.size()
        << " labels needing " << needed;
    return why.str();
  }
  if (example) {
    example->utterance = utt;
    example->labels = std::move(labels);
    example->duration_s = seconds;
  }
  return "";
}

namespace {

// Checks `utts` on `threads` threads; usable ones become ds's examples, the rest its problems
// (after any already there), in order. Throws on the first problem with fatal_bad_utterances.
void check_all(const std::vector<Utterance>& utts, const DatasetChecks& checks, int threads,
               Dataset* ds) {
  std::vector<Example> examples(utts.size());
  std::vector<std::string> reasons(utts.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < utts.size(); i = next++)
      reasons[i] = check_utterance(utts[i], checks, &examples[i]);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (size_t i = 0; i < utts.size(); ++i) {
    if (reasons[i].empty()) {
      ds->examples.push_back(std::move(examples[i]));
    } else {
      ds->problems.push_back(describe_problem(utts[i], reasons[i]));
      if (checks.data.fatal_bad_utterances) throw Error(ds->problems.back());
    }
  }
}

}  // namespace

Dataset check_dataset(const std::string& manifest, const DatasetChecks& checks, int threads) {
  Dataset ds;
  ds.manifest = manifest;
  std::vector<std::string> manifest_problems;
  std::vector<Utterance> utts = read_manifest(manifest, &manifest_problems);
  if (checks.data.fatal_bad_utterances && !manifest_problems.empty())
    throw Error(manifest_problems.front());
  ds.total_lines = static_cast<int64_t>(utts.size() + manifest_problems.size());
  ds.problems = std::move(manifest_problems);
  check_all(utts, checks, threads, &ds);
  return ds;
}

Dataset load_dataset(const std::string& manifest, const DatasetChecks& checks, int threads) {
  Dataset ds = check_dataset(manifest, checks, threads);
  DS2_CHECK(!ds.examples.empty(), manifest << ": no usable utterance (" << ds.problems.size()
                                           << " problems; run ds2 validate-data)");
  return ds;
}

std::vector<Utterance> command_line_utterances(const std::vector<std::string>& paths) {
  std::vector<Utterance> utts(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    utts[i].id = paths[i];
    utts[i].audio_path = paths[i];
    utts[i].manifest = kCommandLineManifest;
    utts[i].line = static_cast<int>(i + 1);
  }
  return utts;
}

Dataset audio_files_dataset(const std::vector<std::string>& paths, const DatasetChecks& checks,
                            int threads) {
  Dataset ds;
  ds.manifest = kCommandLineManifest;
  ds.total_lines = static_cast<int64_t>(paths.size());
  check_all(command_line_utterances(paths), checks, threads, &ds);
  return ds;
}

}  // namespace ds2
