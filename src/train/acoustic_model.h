// AcousticModel: everything that turns audio into text, kept together so training, evaluation
// and transcription always agree: the resolved config, the alphabet, the featurizer (with global
// feature statistics when used) and the network. It round-trips through a checkpoint.
//
//   ds2::AcousticModel am = ds2::AcousticModel::load("runs/fsdd/best.ckpt");
//   auto texts = ds2::transcribe_files(am, {"a.wav", "b.flac"}, /*batch_size=*/8);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/alphabet.h"
#include "data/dataset.h"
#include "data/featurizer.h"
#include "nn/model.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/inference.h"

namespace ds2 {

struct AcousticModel {
  Config config;
  Alphabet alphabet = Alphabet::english();
  std::unique_ptr<Featurizer> featurizer;
  std::unique_ptr<Model> model;
  // Where forward_inference runs (not owned); null: the host model.
  InferenceEngine* inference = nullptr;

  // Inference-mode logits for a batch of features, on the installed engine or the host model.
  const Sequences& forward_inference(const Sequences& features);

  // A fresh model for `config` with parameters initialized from run.seed.
  static AcousticModel create(const Config& config);
  // Rebuilds the model a checkpoint was trained with and loads its weights.
  static AcousticModel load(const std::string& checkpoint_path);

  // Weights, batch-norm statistics and the metadata needed to rebuild (config, alphabet, stats).
  Checkpoint to_checkpoint() const;
  // Loads weights and buffers by name; every tensor must be present with the right shape.
  void load_weights(const Checkpoint& checkpoint);
  // The global feature statistics a checkpoint holds (features.normalize: global), if any.
  void load_feature_stats(const Checkpoint& checkpoint);
  // The data checks this model implies (its alphabet, front-end and conv striding).
  DatasetChecks dataset_checks() const;
};

Alphabet alphabet_for(const DataConfig& data);

}  // namespace ds2
