// Self-training on untranscribed recordings of a new speaker or channel (pseudo-labels): the model
// transcribes them itself, after adapting its batch-norm statistics to them (AdaBN) and with its
// decoder (beam search and LM when the checkpoint's decode: section has one), optionally keeping
// only the recordings it is most confident of, and is then
// fine-tuned from its own weights on its training set plus `repeat` copies of those recordings
// with their pseudo-transcripts. Each round labels with the previous round's model. The
// manifest's transcripts are never read, so its recordings need none; they must not be the
// recordings a test is made of.
//
//   ds2::SelfTrainingOptions o;                       // 2 rounds, 3 copies, AdaBN 2 passes
//   o.overrides = {"run.device=cuda"};
//   auto rounds = ds2::self_train("runs/fsdd/best.ckpt", "new-voice.jsonl", "runs/adapt", o,
//                                 [](const std::string& line) { std::cout << line << "\n"; });
//   // runs/adapt/adapted.ckpt is the last round's model; runs/adapt/round-N/ has each round's
//   // pseudo-labels (pseudo.jsonl), training manifest (train.jsonl) and training run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "train/text_decoder.h"
#include "train/trainer.h"

namespace ds2 {

struct AcousticModel;

struct SelfTrainingOptions {
  int rounds = 2;
  int repeat = 3;           // copies of the pseudo-labelled recordings beside the training set
  int adapt_bn_passes = 2;  // AdaBN passes before labelling (the labelling model only)
  // The fraction of labelled recordings kept: those the labelling model is most sure of (the
  // utterance confidence of train/transcribe.h); 1 keeps all.
  double keep = 1.0;
  int batch_size = 16;  // labelling
  int threads = 2;
  std::string device = "auto";  // where labelling runs: auto | cpu | cuda
  // The labelling decoder; unset: the checkpoint's decode: section.
  std::function<TextDecoder(const AcousticModel&)> make_decoder;
  // key.path=value overrides of the fine-tuning config, applied after the defaults
  // (kSelfTrainingDefaults) and before the keys each round sets itself (kSelfTrainingKeys).
  std::vector<std::string> overrides;
};

// The fine-tuning schedule unless overridden: a few epochs at a lower rate than from scratch.
extern const std::vector<std::string> kSelfTrainingDefaults;
// Set by each round (an override of one is an error): its run folder, its training manifest,
// the weights it starts from, and a fresh start when the folder exists.
extern const std::vector<std::string> kSelfTrainingKeys;

struct SelfTrainingRound {
  std::string checkpoint;  // the round's model: OUT/round-N/last.ckpt
  int64_t labelled = 0;    // recordings with a pseudo-transcript, each used `repeat` times
  int64_t empty = 0;       // decoded to no words: left out
  int64_t unsure = 0;      // below the `keep` fraction's confidence: left out
  int64_t unusable = 0;    // failed the audio checks or decoding: left out, with a reason logged
  TrainSummary training;
};

// Runs `options.rounds` rounds in OUT/round-1, OUT/round-2, ... and copies the last round's
// model to OUT/adapted.ckpt. Throws ds2::Error on a bad argument, an override of a key the
// rounds set, or a manifest with no usable recording.
std::vector<SelfTrainingRound> self_train(const std::string& checkpoint,
                                          const std::string& manifest, const std::string& out_dir,
                                          const SelfTrainingOptions& options,
                                          const std::function<void(const std::string&)>& log);

}  // namespace ds2
