// `ds2 export`: the file is read back by independent readers (tests/scripts/read_safetensors.py,
// with numpy and with Python's standard library alone, and Hugging Face's safetensors package
// where installed) and compared with the model that was exported, tensor by tensor (name,
// shape, CRC-32 of the bytes, sum) and key by key.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/checksum.h"
#include "support/fsdd_fixture.h"
#include "support/run_command.h"
#include "support/temp_dir.h"
#include "train/acoustic_model.h"
#include "train/checkpoint.h"
#include "train/export_model.h"

namespace ds2 {
namespace {

using testing::run_command;
using testing::shell_quote;

struct ReadTensor {
  std::string dtype;
  std::string dims;
  uint32_t crc = 0;
  double sum = 0;
};

struct ReadBack {
  std::map<std::string, std::string> meta;
  std::vector<std::string> order;  // tensors in file order
  std::map<std::string, ReadTensor> tensors;
};

ReadBack parse_reader_output(const std::string& text) {
  ReadBack out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string kind, name;
    row >> kind >> name;
    if (kind == "meta") {
      std::string json;
      std::getline(row >> std::ws, json);
      out.meta[name] = nlohmann::json::parse(json).get<std::string>();
    } else if (kind == "tensor") {
      ReadTensor t;
      row >> t.dtype >> t.dims >> t.crc >> t.sum;
      out.order.push_back(name);
      out.tensors[name] = t;
    }
  }
  return out;
}

std::string dims_of(const Shape& shape) {
  std::string out;
  for (int64_t d : shape.to_vector()) out += (out.empty() ? "" : ",") + std::to_string(d);
  return out;
}

class Export : public ::testing::Test {
 protected:
  void SetUp() override {
    Config cfg = parse_config(
        "features: {sample_rate: 8000, type: mel, n_mels: 16}\n"
        "model: {conv: [{channels: 4, kernel: [5, 5], stride: [2, 2]}], rnn_layers: 2,"
        " rnn_hidden: 12}\n");
    am_ = std::make_unique<AcousticModel>(AcousticModel::create(cfg));
    // Batch-norm statistics unlike their initial values, so they are checked too.
    Tensor& buffers = am_->model->parameters().buffers();
    for (int64_t i = 0; i < buffers.numel(); ++i) buffers.data()[i] = 0.5f + 0.01f * (i % 37);
    Checkpoint ck = am_->to_checkpoint();
    ck.metadata["step"] = "42";
    ck.metadata["epoch"] = "3";
    checkpoint_ = dir_.file("model.ckpt");
    save_checkpoint(checkpoint_, ck);
    source_ = ck;
  }

  TempDir dir_;
  std::unique_ptr<AcousticModel> am_;
  std::string checkpoint_;
  Checkpoint source_;
};

TEST_F(Export, IndependentReaderSeesEveryTensorAndTheMetadata) {
  if (run_command("python3 -c 'import json, zlib'").code != 0)
    GTEST_SKIP() << "python3 is not installed: the export is not read back independently";
  const std::string out = dir_.file("model.safetensors");
  auto r = run_command(std::string(DS2_BINARY) + " export " + checkpoint_ + " " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  int64_t values = 0;
  for (const auto& t : source_.tensors) values += static_cast<int64_t>(t.data.size());
  EXPECT_EQ(r.output, out + ": " + std::to_string(source_.tensors.size()) + " tensors, " +
                          std::to_string(values) + " float32 values, " +
                          std::to_string(std::filesystem::file_size(out)) + " bytes (from " +
                          checkpoint_ + ")\n");

  const std::string reader = std::string(DS2_SOURCE_DIR) + "/tests/scripts/read_safetensors.py";
  const auto with_numpy = run_command("python3 " + reader + " " + shell_quote(out), false);
  ASSERT_EQ(with_numpy.code, 0) << with_numpy.output;
  const auto without_numpy =
      run_command("DS2_NO_NUMPY=1 python3 " + reader + " " + shell_quote(out), false);
  ASSERT_EQ(without_numpy.code, 0) << without_numpy.output;

  // Hugging Face's own reader too, where it is installed (pip install safetensors).
  std::vector<std::pair<std::string, bool>> outputs = {{with_numpy.output, true},
                                                       {without_numpy.output, true}};
  if (run_command("python3 -c 'import safetensors, numpy'").code == 0) {
    const auto official =
        run_command("python3 " + reader + " --safetensors-package " + shell_quote(out), false);
    ASSERT_EQ(official.code, 0) << official.output;
    outputs.push_back({official.output, false});  // in name order
  } else {
    std::cout << "note: Python package safetensors not installed; export read by "
                 "tests/scripts/read_safetensors.py only\n";
  }

  for (const auto& [text, in_file_order] : outputs) {
    const ReadBack back = parse_reader_output(text);
    // Tensors: the checkpoint's, in the model's order, with identical bytes.
    ASSERT_EQ(back.order.size(), source_.tensors.size()) << text;
    for (size_t i = 0; i < source_.tensors.size(); ++i) {
      const NamedTensor& t = source_.tensors[i];
      if (in_file_order) EXPECT_EQ(back.order[i], t.name);
      ASSERT_TRUE(back.tensors.count(t.name)) << t.name;
      const ReadTensor& got = back.tensors.at(t.name);
      EXPECT_EQ(got.dtype, "F32");
      EXPECT_EQ(got.dims, dims_of(t.shape)) << t.name;
      EXPECT_EQ(got.crc, crc32(t.data.data(), t.data.size() * sizeof(float))) << t.name;
      double sum = 0, magnitude = 0;
      for (float v : t.data) {
        sum += v;
        magnitude += std::abs(v);
      }
      EXPECT_NEAR(got.sum, sum, 1e-9 * (1 + magnitude)) << t.name;
    }
    EXPECT_TRUE(back.tensors.count("conv0.bn.running_mean"));
    EXPECT_TRUE(back.tensors.count("fc.weight"));

    // Metadata.
    EXPECT_EQ(back.meta.at("format"), "ds2-export-1");
    EXPECT_EQ(back.meta.at("config"), am_->config.resolved_yaml);
    EXPECT_EQ(nlohmann::json::parse(back.meta.at("alphabet")).get<std::vector<std::string>>(),
              am_->alphabet.symbols());
    EXPECT_EQ(back.meta.at("source"), checkpoint_);
    EXPECT_EQ(back.meta.at("source_step"), "42");
    EXPECT_EQ(back.meta.at("source_epoch"), "3");
    EXPECT_TRUE(back.meta.count("ds2.crc32c"));
    const nlohmann::json model = nlohmann::json::parse(back.meta.at("model"));
    EXPECT_EQ(model.at("num_classes"), 29);
    EXPECT_EQ(model.at("blank"), 0);
    EXPECT_EQ(model.at("input_features"), 16);
    EXPECT_EQ(model.at("sample_rate"), 8000);
    EXPECT_EQ(model.at("feature_type"), "mel");
    EXPECT_EQ(model.at("conv_time_stride"), 2);
    EXPECT_DOUBLE_EQ(model.at("output_frame_seconds").get<double>(), 0.02);
    std::vector<std::string> parameters;
    int64_t count = 0;
    for (const auto& e : am_->model->parameters().parameters()) {
      parameters.push_back(e.name);
      count += e.numel;
    }
    EXPECT_EQ(model.at("parameters").get<std::vector<std::string>>(), parameters);
    EXPECT_EQ(model.at("parameter_count").get<int64_t>(), count);
    EXPECT_EQ(model.at("buffers").size() + parameters.size(), source_.tensors.size());
  }
}

// The export is itself a checkpoint: ds2 loads it into the same model and transcribes the same.
TEST_F(Export, ExportedFileLoadsAsACheckpoint) {
  const std::string out = dir_.file("model.safetensors");
  ASSERT_EQ(run_command(std::string(DS2_BINARY) + " export " + checkpoint_ + " " + out).code, 0);
  const AcousticModel back = AcousticModel::load(out);
  const ParameterStore& a = am_->model->parameters();
  const ParameterStore& b = back.model->parameters();
  ASSERT_EQ(a.values().numel(), b.values().numel());
  for (int64_t i = 0; i < a.values().numel(); ++i)
    ASSERT_EQ(a.values().data()[i], b.values().data()[i]) << i;
  for (int64_t i = 0; i < a.buffers().numel(); ++i)
    ASSERT_EQ(a.buffers().data()[i], b.buffers().data()[i]) << i;

  testing::write_digit_manifest(dir_.path(), "lucas", {4}, 1);
  const std::string wav = dir_.file("lucas_4_0.wav");
  const auto from_ckpt =
      run_command(std::string(DS2_BINARY) + " transcribe " + checkpoint_ + " " + wav);
  const auto from_export = run_command(std::string(DS2_BINARY) + " transcribe " + out + " " + wav);
  EXPECT_EQ(from_ckpt.code, 0) << from_ckpt.output;
  EXPECT_EQ(from_export.output, from_ckpt.output);
}

TEST_F(Export, RefusesToOverwriteItsSourceAndNamesBadInput) {
  auto r = run_command(std::string(DS2_BINARY) + " export " + checkpoint_ + " " + checkpoint_);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.output, "ds2: error: " + checkpoint_ +
                          ": refusing to overwrite the checkpoint being exported\n");
  const std::string junk = dir_.file("junk.ckpt");
  std::ofstream(junk) << "nope";
  r = run_command(std::string(DS2_BINARY) + " export " + junk + " " + dir_.file("x.safetensors"));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.output.rfind("ds2: error: " + junk + ": ", 0), 0u) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("x.safetensors")));
}

}  // namespace
}  // namespace ds2
