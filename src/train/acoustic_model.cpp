#include "train/acoustic_model.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ds2 {

Alphabet alphabet_for(const DataConfig& data) {
  return data.alphabet.empty() ? Alphabet::english() : Alphabet::from_file(data.alphabet);
}

namespace {
AcousticModel build(const Config& config, Alphabet alphabet) {
  AcousticModel am;
  am.config = config;
  am.alphabet = std::move(alphabet);
  am.featurizer = std::make_unique<Featurizer>(config.features, config.augment);
  am.model = std::make_unique<Model>(config.model, am.featurizer->num_features(),
                                     am.alphabet.num_classes());
  return am;
}
}  // namespace

AcousticModel AcousticModel::create(const Config& config) {
  AcousticModel am = build(config, alphabet_for(config.data));
  Rng rng(static_cast<uint64_t>(config.run.seed));
  am.model->initialize(rng);
  return am;
}

AcousticModel AcousticModel::load(const std::string& checkpoint_path) {
  Checkpoint ck = load_checkpoint(checkpoint_path);
  Config config;
  std::vector<std::string> symbols;
  try {
    config = parse_config(ck.meta("config"), {}, checkpoint_path + " (embedded config)");
    symbols = nlohmann::json::parse(ck.meta("alphabet")).get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    DS2_FAIL(checkpoint_path << ": corrupt alphabet metadata: " << e.what());
  }
  AcousticModel am = build(config, Alphabet(symbols));
  am.load_feature_stats(ck);
  am.load_weights(ck);
  return am;
}

Checkpoint AcousticModel::to_checkpoint() const {
  Checkpoint ck;
  ck.metadata["format"] = "ds2-checkpoint-1";
  ck.metadata["config"] = config.resolved_yaml;
  ck.metadata["alphabet"] = nlohmann::json(alphabet.symbols()).dump();
  if (!featurizer->global_mean().empty()) {
    ck.metadata["feature_mean"] = nlohmann::json(featurizer->global_mean()).dump();
    ck.metadata["feature_stddev"] = nlohmann::json(featurizer->global_stddev()).dump();
  }
  const ParameterStore& store = model->parameters();
  auto add = [&](const ParamEntry& e, const Tensor& flat) {
    const float* p = flat.data() + e.offset;
    ck.tensors.push_back({e.name, e.shape, std::vector<float>(p, p + e.numel)});
  };
  for (const auto& e : store.parameters()) add(e, store.values());
  for (const auto& e : store.buffer_entries()) add(e, store.buffers());
  return ck;
}

DatasetChecks AcousticModel::dataset_checks() const {
  const Model* m = model.get();
  return {config.data, alphabet, *featurizer, [m](int frames) { return m->output_length(frames); }};
}

void AcousticModel::load_weights(const Checkpoint& ck) {
  ParameterStore& store = model->parameters();
  auto load = [&](const ParamEntry& e, Tensor& flat) {
    const NamedTensor* t = ck.find(e.name);
    DS2_CHECK(t, ck.path << ": missing tensor '" << e.name << "' for this model");
    DS2_CHECK(t->shape == e.shape, ck.path << ": tensor '" << e.name << "' has shape "
                                           << shape_str(t->shape) << ", the model needs "
                                           << shape_str(e.shape));
    std::copy(t->data.begin(), t->data.end(), flat.data() + e.offset);
  };
  for (const auto& e : store.parameters()) load(e, store.values());
  for (const auto& e : store.buffer_entries()) load(e, store.buffers());
}

void AcousticModel::load_feature_stats(const Checkpoint& ck) {
  if (!ck.metadata.count("feature_mean")) return;
  featurizer->set_global_stats(
      nlohmann::json::parse(ck.meta("feature_mean")).get<std::vector<float>>(),
      nlohmann::json::parse(ck.meta("feature_stddev")).get<std::vector<float>>());
}

const Sequences& AcousticModel::forward_inference(const Sequences& features) {
  if (inference) return inference->logits(features);
  model->forward(features, /*training=*/false);
  return model->logits();
}

#ifndef DS2_HAVE_CUDA
std::unique_ptr<InferenceEngine> make_inference_engine(AcousticModel& /*am*/,
                                                       const std::string& device) {
  DS2_CHECK(device != "cuda",
            "device cuda: this ds2 was built without CUDA (DS2_WITH_CUDA=OFF "
            "or no nvcc); use cpu or auto");
  return nullptr;
}
#endif

}  // namespace ds2
