#include "cli/commands.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "audio/audio_io.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "ctc/error_rate.h"
#include "ctc/trn_score.h"
#include "data/dataset.h"
#include "data/kaldi_import.h"
#include "data/loader_threads.h"
#include "dist/world.h"
#include "train/acoustic_model.h"
#include "train/adapt_batch_norm.h"
#include "train/evaluate.h"
#include "train/export_model.h"
#include "train/self_training.h"
#include "train/text_decoder.h"
#include "train/trainer.h"
#include "train/transcribe.h"

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

// The decoder a checkpoint's decode: section and the command-line flags ask for.
TextDecoder make_decoder(const AcousticModel& am, const DecodeArgs& args) {
  if (args.greedy) return TextDecoder(am.alphabet);
  DecodeConfig config = am.config.decode;
  args.apply(&config);
  return TextDecoder(am.alphabet, config);
}

// Seconds and confidences in JSON output: rounded to 1 ms and 4 decimals (scale 1e3, 1e4).
double round_to(double v, double scale) {
  return std::round(v * scale) / scale;
}

std::string format_number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}
}  // namespace

void DecodeArgs::apply(DecodeConfig* config) const {
  if (set_lm) config->lm_path = lm_path;
  if (set_lm_weight) config->lm_weight = lm_weight;
  if (set_word_score) config->word_score = word_score;
  if (set_beam) config->beam_width = beam_width;
}

int train(const TrainArgs& args) {
  std::vector<std::string> overrides = args.overrides;
  if (args.resume) overrides.push_back("run.resume=required");
  Config cfg = load_config(args.config, overrides);
  Trainer trainer(cfg);
  trainer.run();
  return 0;
}

namespace {
// Installs the GPU inference engine in `am` when the device asks for one; keep the result alive
// while `am` is used.
std::unique_ptr<InferenceEngine> run_on_device(AcousticModel& am, const DecodeArgs& args) {
  std::unique_ptr<InferenceEngine> engine = make_inference_engine(am, args.device);
  am.inference = engine.get();
  return engine;
}
}  // namespace

int eval(const EvalArgs& args) {
  AcousticModel am = AcousticModel::load(args.checkpoint);
  DatasetChecks checks = am.dataset_checks();
  Dataset ds = load_dataset(args.manifest, checks, args.threads);
  for (const auto& p : ds.problems) std::cerr << "skip: " << p << "\n";
  if (args.adapt_bn > 0) {
    // On the host model, before a GPU engine copies the weights and statistics.
    adapt_batch_norm(am, ds, args.adapt_bn, args.batch_size, args.threads);
    std::cout << "batch-norm statistics adapted to " << ds.examples.size()
              << " utterances of this manifest, " << args.adapt_bn
              << " passes (transcripts unused)\n";
  }
  const auto device = run_on_device(am, args.decode);
  const TextDecoder decoder = make_decoder(am, args.decode);
  EvalResult r = evaluate(am, ds, decoder, args.warps, args.batch_size, args.threads);
  for (const auto& f : r.failures) std::cerr << "skip: " << f << "\n";
  std::cout << "decoder: " << decoder.describe() << "\n";
  std::cout << "utterances " << r.utterances.size() << " (skipped "
            << ds.problems.size() + r.failures.size() << "), audio " << r.audio_seconds
            << " s, decoded in " << r.wall_seconds << " s\n";
  std::cout << "WER " << percent(r.words.rate()) << " " << counts(r.words) << "\n";
  std::cout << "CER " << percent(r.chars.rate()) << " " << counts(r.chars) << "\n";
  if (!r.warps.empty()) {
    std::map<double, int> chosen;
    for (double w : r.warps) ++chosen[w];
    std::cout << "frequency warps chosen (warp: utterances):";
    for (const auto& [w, count] : chosen) std::cout << " " << w << ": " << count;
    std::cout << "\n";
  }
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
  if (args.show_confusions > 0) {
    std::vector<std::pair<std::string, std::string>> texts;
    for (const auto& u : r.utterances) texts.emplace_back(u.reference, u.hypothesis);
    std::vector<Confusion> confusions = word_confusions(texts);
    if (confusions.size() > static_cast<size_t>(args.show_confusions))
      confusions.resize(args.show_confusions);
    for (const auto& c : confusions)
      std::cout << "confusion: " << c.ref << " -> " << c.hyp << " " << c.count << "\n";
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

int adapt(const AdaptArgs& args) {
  // Every round labels on one process and writes one set of files; ranks would race on them.
  DS2_CHECK(!dist::World::get().distributed(),
            "adapt: runs as one process (not under mpirun); its fine-tuning may still use "
            "run.device=cuda");
  SelfTrainingOptions o;
  o.rounds = args.rounds;
  o.repeat = args.repeat;
  o.adapt_bn_passes = args.adapt_bn;
  o.keep = args.keep;
  o.batch_size = args.batch_size;
  o.threads = args.threads;
  o.device = args.decode.device;
  o.make_decoder = [&](const AcousticModel& am) { return make_decoder(am, args.decode); };
  o.overrides = args.overrides;
  const std::vector<SelfTrainingRound> rounds =
      self_train(args.checkpoint, args.manifest, args.out_dir, o,
                 [](const std::string& line) { std::cout << "adapt: " << line << std::endl; });
  for (size_t i = 0; i < rounds.size(); ++i) {
    const SelfTrainingRound& r = rounds[i];
    std::cout << "adapt: round " << i + 1 << ": " << r.labelled << " pseudo-labelled recordings, "
              << r.training.steps << " steps in " << r.training.wall_seconds << " s -> "
              << r.checkpoint << "\n";
  }
  return 0;
}

namespace {
// --adapt-bn for transcription: batch-norm statistics from the recordings about to be
// transcribed (meant for many recordings of one new voice), on the host model before a GPU
// engine copies it. Files the training checks refuse (unreadable, longer than
// data.max_duration_s, ...) are left out of the statistics and counted; they are still
// transcribed, or reported, as usual. Messages go to stderr: stdout holds the transcripts.
void adapt_to_recordings(AcousticModel& am, const std::vector<std::string>& paths, int passes,
                         int batch_size, int threads) {
  DataConfig data = am.config.data;
  data.fatal_bad_utterances = false;
  const DatasetChecks model_checks = am.dataset_checks();
  const DatasetChecks checks{data, am.alphabet, *am.featurizer, model_checks.output_length,
                             /*transcribed=*/false};
  const Dataset ds = audio_files_dataset(paths, checks, threads);
  DS2_CHECK(!ds.examples.empty(), "--adapt-bn: none of the "
                                      << paths.size()
                                      << " recordings can be used: " << ds.problems.front());
  adapt_batch_norm(am, ds, passes, batch_size, threads);
  std::cerr << "batch-norm statistics adapted to " << ds.examples.size() << " of " << paths.size()
            << " recordings, " << passes << " passes (left out: " << ds.problems.size();
  if (!ds.problems.empty()) std::cerr << ", first: " << ds.problems.front();
  std::cerr << ")\n";
}
}  // namespace

int transcribe(const TranscribeArgs& args) {
  std::vector<std::string> paths;
  for (const std::string& a : args.audio) {
    if (a != "-") {
      paths.push_back(a);
      continue;
    }
    for (std::string line; std::getline(std::cin, line);) {
      const size_t first = line.find_first_not_of(" \t\r");
      if (first == std::string::npos) continue;
      paths.push_back(line.substr(first, line.find_last_not_of(" \t\r") - first + 1));
    }
  }
  if (!args.manifest.empty()) {
    std::vector<std::string> listed = manifest_audio_paths(args.manifest);
    paths.insert(paths.end(), listed.begin(), listed.end());
  }
  DS2_CHECK(!paths.empty(),
            "transcribe: no audio (give files, '-' to read paths from stdin, or --manifest M)");
  DS2_CHECK(args.format == "text" || args.format == "json",
            "transcribe: --format must be text or json, got '" << args.format << "'");
  AcousticModel am = AcousticModel::load(args.checkpoint);
  if (args.adapt_bn > 0)
    adapt_to_recordings(am, paths, args.adapt_bn, args.batch_size, args.threads);
  const auto device = run_on_device(am, args.decode);
  const TextDecoder decoder = make_decoder(am, args.decode);
  TranscribeOptions options;
  options.batch_size = args.batch_size;
  options.threads = args.threads;
  options.window_s = args.window_s;
  options.overlap_s = args.overlap_s;
  options.word_timings = args.format == "json";
  Transcriber transcriber(am, decoder, options);
  int failed = 0;
  transcriber.run(paths, [&](const Transcript& t) {
    if (!t.error.empty()) {
      std::cerr << "skip: " << t.error << std::endl;
      ++failed;
      return;
    }
    if (args.format == "text") {
      std::cout << t.path << "\t" << t.text << std::endl;
      return;
    }
    nlohmann::ordered_json words = nlohmann::ordered_json::array();
    for (const WordTiming& w : t.words)
      words.push_back({{"word", w.word},
                       {"start", round_to(w.start_s, 1e3)},
                       {"end", round_to(w.end_s, 1e3)},
                       {"confidence", round_to(w.confidence, 1e4)}});
    nlohmann::ordered_json out = {{"path", t.path},
                                  {"duration", round_to(t.duration_s, 1e3)},
                                  {"text", t.text},
                                  {"confidence", round_to(t.confidence, 1e4)},
                                  {"words", words}};
    std::cout << out.dump() << std::endl;
  });
  return failed == 0 ? 0 : 1;
}

int score(const ScoreArgs& args) {
  const TrnScore s = score_trn(read_trn(args.ref), read_trn(args.hyp));
  if (args.per_utterance) {
    for (const TrnUtteranceScore& u : s.utterances)
      std::cout << "utt " << u.id << " C=" << u.words.correct << " S=" << u.words.substitutions
                << " D=" << u.words.deletions << " I=" << u.words.insertions
                << " N=" << u.words.reference_length << "\n";
  }
  std::cout << "utterances " << s.utterances.size() << " (with word errors "
            << s.utterances_with_errors << ")\n";
  std::cout << "WER " << percent(s.words.rate()) << " " << counts(s.words) << "\n";
  std::cout << "CER " << percent(s.chars.rate()) << " " << counts(s.chars) << "\n";
  return 0;
}

int export_model(const ExportArgs& args) {
  const ExportSummary s = ds2::export_model(args.checkpoint, args.out);
  std::cout << args.out << ": " << s.tensors << " tensors, " << s.values << " float32 values, "
            << s.bytes << " bytes (from " << args.checkpoint << ")\n";
  return 0;
}

int tune_decoder(const TuneDecoderArgs& args) {
  DS2_CHECK(!args.alphas.empty() && !args.betas.empty(),
            "tune-decoder: --alphas and --betas need at least one value each");
  std::vector<double> alphas = args.alphas, betas = args.betas;
  std::sort(alphas.begin(), alphas.end());
  std::sort(betas.begin(), betas.end());
  AcousticModel am = AcousticModel::load(args.checkpoint);
  const auto device = run_on_device(am, args.decode);
  DecodeConfig config = am.config.decode;
  args.decode.apply(&config);
  DS2_CHECK(!config.lm_path.empty(),
            "tune-decoder: no language model (give --lm PATH; the checkpoint's decode.lm_path is "
            "empty)");
  const TextDecoder with_lm(am.alphabet, config);
  DecodeConfig no_lm_config = config;
  no_lm_config.lm_path.clear();
  no_lm_config.beam_width = effective_beam_width(config);
  const TextDecoder no_lm(am.alphabet, no_lm_config);

  DatasetChecks checks = am.dataset_checks();
  Dataset ds = load_dataset(args.manifest, checks, args.threads);
  for (const auto& p : ds.problems) std::cerr << "skip: " << p << "\n";
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> failures;
  const std::vector<UtteranceLogits> logits =
      dataset_logits(am, ds, args.batch_size, args.threads, &failures);
  for (const auto& f : failures) std::cerr << "skip: " << f << "\n";
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::cout << args.manifest << ": " << ds.examples.size() << " utterances (skipped "
            << ds.problems.size() + failures.size() << "), network run once in " << seconds()
            << " s\n";
  auto score = [&](const TextDecoder& d) {
    return score_texts(am, ds, decode_logits(logits, d, args.threads));
  };
  const EvalResult greedy = score(TextDecoder(am.alphabet));
  std::cout << "greedy: WER " << percent(greedy.words.rate()) << " CER "
            << percent(greedy.chars.rate()) << "\n";
  const EvalResult plain = score(no_lm);
  std::cout << no_lm.describe() << " without LM: WER " << percent(plain.words.rate()) << " CER "
            << percent(plain.chars.rate()) << "\n";

  std::cout << "beam " << effective_beam_width(config) << " + LM " << config.lm_path
            << ": WER by alpha (lm_weight, rows) and beta (word_score, columns)\n";
  char cell[32];
  std::cout << "alpha\\beta";
  for (double beta : betas) {
    std::snprintf(cell, sizeof cell, "%9s", format_number(beta).c_str());
    std::cout << cell;
  }
  std::cout << "\n";
  struct Best {
    double alpha = 0, beta = 0;
    ErrorCounts words, chars;
    bool set = false;
  } best;
  for (double alpha : alphas) {
    std::snprintf(cell, sizeof cell, "%-10s", format_number(alpha).c_str());
    std::cout << cell;
    for (double beta : betas) {
      const EvalResult r = score(with_lm.with_lm_weights(alpha, beta));
      std::snprintf(cell, sizeof cell, "%9s", percent(r.words.rate()).c_str());
      std::cout << cell << std::flush;
      // Fewest word errors, then character errors, then the smallest alpha, then the beta
      // closest to 0.
      const auto rank = [](const ErrorCounts& w, const ErrorCounts& c, double a, double b) {
        return std::make_tuple(w.errors(), c.errors(), a, std::abs(b), b);
      };
      const bool better = !best.set || rank(r.words, r.chars, alpha, beta) <
                                           rank(best.words, best.chars, best.alpha, best.beta);
      if (better) best = Best{alpha, beta, r.words, r.chars, true};
    }
    std::cout << "\n";
  }
  std::cout << "best: alpha " << format_number(best.alpha) << " beta " << format_number(best.beta)
            << ": WER " << percent(best.words.rate()) << " " << counts(best.words) << ", CER "
            << percent(best.chars.rate()) << " " << counts(best.chars) << "\n";
  std::cout << "use: decode.lm_weight=" << format_number(best.alpha)
            << " decode.word_score=" << format_number(best.beta) << "  (or --lm-weight "
            << format_number(best.alpha) << " --word-score " << format_number(best.beta) << "); "
            << seconds() << " s in all\n";
  return 0;
}

int validate_data(const ValidateArgs& args) {
  // A manifest alone is checked as the default config (with the overrides) would use it.
  const std::string ext = std::filesystem::path(args.config).extension().string();
  const bool manifest_only = ext == ".jsonl" || ext == ".json";
  Config cfg = manifest_only ? parse_config("", args.overrides, "defaults")
                             : load_config(args.config, args.overrides);
  if (manifest_only) {
    cfg.data.train_manifest = args.config;
    cfg.data.dev_manifest.clear();
  }
  // Validation reports every problem; it never stops at the first.
  cfg.data.fatal_bad_utterances = false;
  AcousticModel am = AcousticModel::create(cfg);
  DatasetChecks checks = am.dataset_checks();
  int64_t total = 0, bad = 0;
  for (const std::string& manifest : {cfg.data.train_manifest, cfg.data.dev_manifest}) {
    if (manifest.empty()) continue;
    Dataset ds;
    try {
      ds = check_dataset(manifest, checks, loader_threads(cfg.data.loader_threads, 1));
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
    if (ds.examples.empty()) {  // training would stop here, so it counts as one more problem
      std::cout << manifest << ": no usable utterance\n";
      ++bad;
    }
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
