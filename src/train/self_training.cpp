#include "train/self_training.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "data/dataset.h"
#include "data/manifest.h"
#include "train/acoustic_model.h"
#include "train/adapt_batch_norm.h"
#include "train/config.h"
#include "train/inference.h"
#include "train/transcribe.h"

namespace ds2 {

const std::vector<std::string> kSelfTrainingDefaults = {"train.epochs=4", "optim.lr=3e-4",
                                                        "optim.warmup_steps=50"};
const std::vector<std::string> kSelfTrainingKeys = {"run.dir", "data.train_manifest",
                                                    "train.init_from", "run.resume"};

namespace {

namespace fs = std::filesystem;

struct PseudoLabels {
  std::vector<Utterance> utterances;
  int64_t empty = 0;
  int64_t unusable = 0;
  int64_t unsure = 0;
  std::string decoder;
  std::string base_config;  // the labelling checkpoint's resolved config
  // What AdaBN did first: "2 passes", or why it did not run.
  std::string adaptation;
};

// The model of `checkpoint`, its batch norm adapted to the manifest's audio, transcribes it.
PseudoLabels pseudo_label(const std::string& checkpoint, const std::string& manifest,
                          const SelfTrainingOptions& o,
                          const std::function<void(const std::string&)>& log) {
  AcousticModel am = AcousticModel::load(checkpoint);
  DatasetChecks checks = am.dataset_checks();
  checks.transcribed = false;
  const Dataset ds = load_dataset(manifest, checks, o.threads);
  PseudoLabels out;
  out.base_config = am.config.resolved_yaml;
  for (const std::string& p : ds.problems) log("skip: " + p);
  out.unusable = static_cast<int64_t>(ds.problems.size());
  // On the host model, before an engine copies the weights and statistics.
  if (has_running_statistics(am) || o.adapt_bn_passes == 0) {
    adapt_batch_norm(am, ds, o.adapt_bn_passes, o.batch_size, o.threads);
    out.adaptation = std::to_string(o.adapt_bn_passes) + " passes";
  } else {
    out.adaptation = "skipped (the model normalizes every utterance by its own statistics)";
  }
  const std::unique_ptr<InferenceEngine> engine = make_inference_engine(am, o.device);
  am.inference = engine.get();
  const TextDecoder decoder =
      o.make_decoder ? o.make_decoder(am) : TextDecoder(am.alphabet, am.config.decode);
  out.decoder = decoder.describe();
  TranscribeOptions to;
  to.batch_size = o.batch_size;
  to.threads = o.threads;
  to.word_timings = true;  // for the confidences
  std::vector<std::string> paths;
  for (const Example& e : ds.examples) paths.push_back(e.utterance.audio_path);
  struct Labelled {
    double confidence;
    size_t index;  // into ds.examples
    Utterance utterance;
  };
  std::vector<Labelled> labelled;
  size_t next = 0;
  Transcriber(am, decoder, to).run(paths, [&](const Transcript& t) {
    const size_t i = next++;
    if (!t.error.empty()) {
      log("skip: " + t.error);
      ++out.unusable;
    } else if (t.text.empty()) {
      ++out.empty;
    } else {
      Utterance u = ds.examples[i].utterance;
      u.text = t.text;
      u.duration_s = ds.examples[i].duration_s;
      labelled.push_back({t.confidence, i, std::move(u)});
    }
  });
  // The most confident first (ties: dataset order), then back in dataset order.
  std::stable_sort(labelled.begin(), labelled.end(),
                   [](const auto& a, const auto& b) { return a.confidence > b.confidence; });
  const size_t kept = static_cast<size_t>(std::ceil(o.keep * static_cast<double>(labelled.size())));
  out.unsure = static_cast<int64_t>(labelled.size() - kept);
  labelled.resize(kept);
  std::sort(labelled.begin(), labelled.end(),
            [](const auto& a, const auto& b) { return a.index < b.index; });
  for (Labelled& l : labelled) out.utterances.push_back(std::move(l.utterance));
  am.inference = nullptr;
  return out;
}

// The training set and `repeat` copies of the pseudo-labelled recordings, as one manifest.
void write_training_manifest(const std::string& path, const std::string& train_manifest,
                             const std::vector<Utterance>& pseudo, int repeat,
                             const std::function<void(const std::string&)>& log) {
  std::vector<std::string> problems;
  std::vector<Utterance> all = read_manifest(train_manifest, &problems);
  for (const std::string& p : problems) log("skip: " + p);
  for (int copy = 1; copy <= repeat; ++copy)
    for (const Utterance& u : pseudo) {
      Utterance c = u;
      c.id = "pseudo-" + std::to_string(copy) + ":" + u.id;  // ids stay unique
      all.push_back(std::move(c));
    }
  write_manifest(path, all);
}

std::string override_key(const std::string& override) {
  return override.substr(0, override.find('='));
}

}  // namespace

std::vector<SelfTrainingRound> self_train(const std::string& checkpoint,
                                          const std::string& manifest, const std::string& out_dir,
                                          const SelfTrainingOptions& options,
                                          const std::function<void(const std::string&)>& log) {
  DS2_CHECK(options.rounds >= 1, "self-training: rounds must be >= 1, got " << options.rounds);
  DS2_CHECK(options.repeat >= 1, "self-training: repeat must be >= 1, got " << options.repeat);
  DS2_CHECK(options.keep > 0 && options.keep <= 1,
            "self-training: the kept fraction must be in (0, 1], got " << options.keep);
  DS2_CHECK(options.adapt_bn_passes >= 0,
            "self-training: AdaBN passes must be >= 0, got " << options.adapt_bn_passes);
  for (const std::string& o : options.overrides) {
    const std::string key = override_key(o);
    DS2_CHECK(std::find(kSelfTrainingKeys.begin(), kSelfTrainingKeys.end(), key) ==
                  kSelfTrainingKeys.end(),
              "self-training: key '" << key << "' is set by each round (" << out_dir
                                     << "/round-N), not by an override");
  }
  std::vector<std::string> overrides = kSelfTrainingDefaults;
  overrides.insert(overrides.end(), options.overrides.begin(), options.overrides.end());

  std::vector<SelfTrainingRound> rounds;
  std::string previous = checkpoint;
  // Every round fine-tunes the first checkpoint's configuration on its training set.
  std::string base_config, train_manifest;
  for (int round = 1; round <= options.rounds; ++round) {
    const std::string dir = (fs::path(out_dir) / ("round-" + std::to_string(round))).string();
    fs::create_directories(dir);
    PseudoLabels labels = pseudo_label(previous, manifest, options, log);
    if (base_config.empty()) {
      base_config = labels.base_config;
      train_manifest = parse_config(base_config, overrides, checkpoint).data.train_manifest;
      DS2_CHECK(!train_manifest.empty(),
                checkpoint << ": its config names no data.train_manifest (give one as an "
                              "override): self-training adds to the training set");
    }
    DS2_CHECK(!labels.utterances.empty(), manifest << ": no recording got a pseudo-transcript ("
                                                   << labels.empty << " decoded to no words, "
                                                   << labels.unusable << " unusable)");
    std::ostringstream line;
    line << "round " << round << ": " << labels.utterances.size() << " recordings of " << manifest
         << " labelled by " << previous << " (" << labels.empty << " decoded to no words, "
         << labels.unusable << " unusable, " << labels.unsure
         << " less sure than the kept fraction; AdaBN " << labels.adaptation
         << "; decoder: " << labels.decoder << ")";
    log(line.str());
    write_manifest((fs::path(dir) / "pseudo.jsonl").string(), labels.utterances);
    const std::string mixed = (fs::path(dir) / "train.jsonl").string();
    write_training_manifest(mixed, train_manifest, labels.utterances, options.repeat, log);

    std::vector<std::string> round_overrides = overrides;
    for (const std::string& o : {"run.dir=" + dir, "data.train_manifest=" + mixed,
                                 "train.init_from=" + previous, std::string("run.resume=never")})
      round_overrides.push_back(o);
    Trainer trainer(parse_config(base_config, round_overrides, checkpoint));
    SelfTrainingRound r;
    r.training = trainer.run();
    r.checkpoint = (fs::path(dir) / "last.ckpt").string();
    r.labelled = static_cast<int64_t>(labels.utterances.size());
    r.empty = labels.empty;
    r.unusable = labels.unusable;
    r.unsure = labels.unsure;
    rounds.push_back(r);
    previous = r.checkpoint;
  }
  const std::string adapted = (fs::path(out_dir) / "adapted.ckpt").string();
  write_file_atomic(adapted, read_file(previous));
  log("adapted model: " + adapted + " (round " + std::to_string(options.rounds) + ")");
  return rounds;
}

}  // namespace ds2
