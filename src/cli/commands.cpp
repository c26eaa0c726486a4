#include "cli/commands.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "audio/audio_io.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "data/dataset.h"
#include "data/kaldi_import.h"
#include "train/acoustic_model.h"
#include "train/evaluate.h"
#include "train/trainer.h"

namespace ds2::cli {

namespace {
std::string percent(double rate) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * rate);
  return buf;
}

std::string counts(const ErrorCounts& c) {
  return "(S=" + std::to_string(c.substitutions) + " D=" + std::to_string(c.deletions) +
         " I=" + std::to_string(c.insertions) + " N=" + std::to_string(c.reference_length) + ")";
}

// sclite trn lines: "text (speaker-utterance)"; ids are sanitized to sclite's taste.
std::string trn_line(const std::string& text, const std::string& id) {
  std::string clean = id;
  std::replace_if(
      clean.begin(), clean.end(), [](char c) { return c == ' ' || c == '(' || c == ')'; }, '_');
  return text + " (" + clean + ")\n";
}
}  // namespace

int train(const TrainArgs& args) {
  Config cfg = load_config(args.config, args.overrides);
  Trainer trainer(cfg);
  trainer.run();
  return 0;
}

int eval(const EvalArgs& args) {
  AcousticModel am = AcousticModel::load(args.checkpoint);
  DatasetChecks checks = am.dataset_checks();
  Dataset ds = load_dataset(args.manifest, checks, args.threads);
  for (const auto& p : ds.problems) std::cerr << "skip: " << p << "\n";
  EvalResult r = evaluate(am, ds, args.batch_size, args.threads);
  for (const auto& f : r.failures) std::cerr << "skip: " << f << "\n";
  std::cout << "utterances " << r.utterances.size() << " (skipped "
            << ds.problems.size() + r.failures.size() << "), audio " << r.audio_seconds
            << " s, decoded in " << r.wall_seconds << " s\n";
  std::cout << "WER " << percent(r.words.rate()) << " " << counts(r.words) << "\n";
  std::cout << "CER " << percent(r.chars.rate()) << " " << counts(r.chars) << "\n";
  if (args.show_worst > 0) {
    std::vector<const UtteranceResult*> worst;
    for (const auto& u : r.utterances)
      if (u.words.errors() > 0) worst.push_back(&u);
    std::stable_sort(worst.begin(), worst.end(),
                     [](auto* a, auto* b) { return a->words.errors() > b->words.errors(); });
    if (worst.size() > static_cast<size_t>(args.show_worst)) worst.resize(args.show_worst);
    for (const auto* u : worst)
      std::cout << "worst: " << u->id << " errors " << u->words.errors() << " ref \""
                << u->reference << "\" hyp \"" << u->hypothesis << "\"\n";
  }
  if (!args.trn_prefix.empty()) {
    std::string ref, hyp;
    for (const auto& u : r.utterances) {
      ref += trn_line(u.reference, u.id);
      hyp += trn_line(u.hypothesis, u.id);
    }
    write_file_atomic(args.trn_prefix + ".ref.trn", ref);
    write_file_atomic(args.trn_prefix + ".hyp.trn", hyp);
  }
  return 0;
}

int transcribe(const TranscribeArgs& args) {
  AcousticModel am = AcousticModel::load(args.checkpoint);
  std::vector<std::string> texts = transcribe_files(am, args.audio, args.batch_size, args.threads);
  for (size_t i = 0; i < args.audio.size(); ++i)
    std::cout << args.audio[i] << "\t" << texts[i] << "\n";
  return 0;
}

int validate_data(const ValidateArgs& args) {
  Config cfg = load_config(args.config, args.overrides);
  // Validation reports every problem; it never stops at the first.
  cfg.data.fatal_bad_utterances = false;
  AcousticModel am = AcousticModel::create(cfg);
  DatasetChecks checks = am.dataset_checks();
  int64_t total = 0, bad = 0;
  for (const std::string& manifest : {cfg.data.train_manifest, cfg.data.dev_manifest}) {
    if (manifest.empty()) continue;
    Dataset ds;
    try {
      ds = load_dataset(manifest, checks, std::max(1, cfg.data.loader_threads));
    } catch (const Error& e) {
      std::cout << e.what() << "\n";
      ++bad;
      continue;
    }
    for (const auto& p : ds.problems) std::cout << p << "\n";
    std::cout << manifest << ": " << ds.total_lines << " utterances, " << ds.examples.size()
              << " usable (" << ds.hours() << " h), " << ds.problems.size() << " problems\n";
    total += ds.total_lines;
    bad += static_cast<int64_t>(ds.problems.size());
  }
  std::cout << "summary: " << total << " utterances checked, " << bad << " problems\n";
  return bad == 0 ? 0 : 1;
}

int import_kaldi(const ImportKaldiArgs& args) {
  std::vector<std::string> problems;
  std::vector<Utterance> utts = import_kaldi_dir(args.dir, &problems);
  std::vector<Utterance> usable;
  for (auto& u : utts) {
    try {
      u.duration_s = probe_audio(u.audio_path).duration_s;
      usable.push_back(std::move(u));
    } catch (const Error& e) {
      problems.push_back(u.manifest + ":" + std::to_string(u.line) + ": " + e.what());
    }
  }
  for (const auto& p : problems) std::cerr << "skip: " << p << "\n";
  DS2_CHECK(!usable.empty(), args.dir << ": no usable utterance");
  write_manifest(args.manifest, usable);
  std::cout << args.manifest << ": " << usable.size() << " utterances written, " << problems.size()
            << " skipped\n";
  return problems.empty() ? 0 : 1;
}

}  // namespace ds2::cli
