#include "train/export_model.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ds2 {

Checkpoint export_checkpoint(const AcousticModel& am) {
  Checkpoint ck = am.to_checkpoint();  // weights and buffers by name, config, alphabet, stats
  ck.metadata["format"] = "ds2-export-1";
  int stride = 1;
  for (const auto& c : am.config.model.conv) stride *= c.stride_time;
  const FeatureConfig& f = am.config.features;
  const ParameterStore& store = am.model->parameters();
  nlohmann::json parameters = nlohmann::json::array(), buffers = nlohmann::json::array();
  int64_t parameter_count = 0;
  for (const auto& e : store.parameters()) {
    parameters.push_back(e.name);
    parameter_count += e.numel;
  }
  for (const auto& e : store.buffer_entries()) buffers.push_back(e.name);
  nlohmann::json model = {
      {"num_classes", am.alphabet.num_classes()},
      {"blank", 0},
      {"input_features", am.model->input_features()},
      {"sample_rate", f.sample_rate},
      {"window_ms", f.window_ms},
      {"hop_ms", f.hop_ms},
      {"feature_type", f.type},
      {"normalize", f.normalize},
      {"conv_time_stride", stride},
      {"output_frame_seconds",
       static_cast<double>(am.featurizer->hop_samples()) * stride / f.sample_rate},
      {"parameters", parameters},
      {"buffers", buffers},
      {"parameter_count", parameter_count},
  };
  ck.metadata["model"] = model.dump();
  return ck;
}

ExportSummary export_model(const std::string& checkpoint_path, const std::string& out_path) {
  DS2_CHECK(!out_path.empty(), "export: empty output path");
  std::error_code ec;
  DS2_CHECK(!std::filesystem::exists(checkpoint_path, ec) ||
                !std::filesystem::equivalent(checkpoint_path, out_path, ec),
            out_path << ": refusing to overwrite the checkpoint being exported");
  const Checkpoint source = load_checkpoint(checkpoint_path);
  const AcousticModel am = AcousticModel::load(checkpoint_path);  // checks it rebuilds the model
  Checkpoint ck = export_checkpoint(am);
  ck.metadata["source"] = checkpoint_path;
  for (const char* key : {"step", "epoch"}) {
    auto it = source.metadata.find(key);
    if (it != source.metadata.end()) ck.metadata[std::string("source_") + key] = it->second;
  }
  save_checkpoint(out_path, ck);
  ExportSummary summary;
  summary.tensors = static_cast<int>(ck.tensors.size());
  for (const auto& t : ck.tensors) summary.values += static_cast<int64_t>(t.data.size());
  summary.bytes = static_cast<int64_t>(std::filesystem::file_size(out_path));
  return summary;
}

}  // namespace ds2
