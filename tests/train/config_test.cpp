#include "train/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "support/temp_dir.h"

namespace ds2 {
namespace {

std::string error_of(const std::string& yaml, const std::vector<std::string>& ov = {}) {
  try {
    parse_config(yaml, ov, "test.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, DefaultsAndValues) {
  Config c = parse_config("optim:\n  lr: 0.01\nmodel:\n  rnn_hidden: 64\n  conv: []\n");
  EXPECT_DOUBLE_EQ(c.optim.lr, 0.01);
  EXPECT_EQ(c.model.rnn_hidden, 64);
  EXPECT_TRUE(c.model.conv.empty());
  EXPECT_EQ(c.train.batch_size, TrainLoopConfig().batch_size);
}

TEST(Config, DottedOverridesWin) {
  Config c = parse_config("optim:\n  lr: 0.01\n", {"optim.lr=3e-4", "train.sortagrad=false",
                                                   "model.conv=[{channels: 8, kernel: [3, 5]}]"});
  EXPECT_DOUBLE_EQ(c.optim.lr, 3e-4);
  EXPECT_FALSE(c.train.sortagrad);
  ASSERT_EQ(c.model.conv.size(), 1u);
  EXPECT_EQ(c.model.conv[0].channels, 8);
  EXPECT_EQ(c.model.conv[0].kernel_freq, 5);
  EXPECT_EQ(c.model.conv[0].stride_time, ConvLayerConfig().stride_time);
}

TEST(Config, UnknownKeyNamesNearestValidKeyAndLine) {
  const std::string msg = error_of("optim:\n  lr: 0.1\n  warmup_step: 5\n");
  EXPECT_NE(msg.find("test.yaml:3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown key 'optim.warmup_step'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'optim.warmup_steps'"), std::string::npos) << msg;
  EXPECT_NE(error_of("", {"optim.lrr=1"}).find("did you mean 'optim.lr'"), std::string::npos);
  EXPECT_NE(error_of("optm:\n  lr: 1\n").find("did you mean 'optim'"), std::string::npos);
}

TEST(Config, BadTypesAndValuesNameTheKey) {
  EXPECT_NE(error_of("train:\n  epochs: many\n").find("key 'train.epochs': expected an integer"),
            std::string::npos);
  EXPECT_NE(error_of("", {"optim.name=adamw"}).find("'adamw' is not one of: adam, sgd"),
            std::string::npos);
  EXPECT_NE(error_of("", {"optim.lr=-1"}).find("optim.lr"), std::string::npos);
  EXPECT_NE(error_of("", {"nokey"}).find("expected key.path=value"), std::string::npos);
  EXPECT_NE(error_of("optim: [1, 2]\n").find("must be a section"), std::string::npos);
  EXPECT_NE(error_of("a: [\n").find("invalid YAML"), std::string::npos);
}

TEST(Config, ResolvedYamlRoundTrips) {
  Config a = parse_config(
      "optim:\n  lr: 0.02\nmodel:\n  conv: [{channels: 4, kernel: [3, 3], "
      "stride: [1, 2]}]\n");
  Config b = parse_config(a.resolved_yaml);
  EXPECT_EQ(a.resolved_yaml, b.resolved_yaml);
  EXPECT_DOUBLE_EQ(b.optim.lr, 0.02);
  EXPECT_EQ(b.model.conv.at(0).stride_freq, 2);
  EXPECT_NE(describe_config_keys().find("optim.lr = 0.0003"), std::string::npos);
}

TEST(Config, FilePathsAreRelativeToTheConfigFile) {
  TempDir temp;
  const std::filesystem::path& dir = temp.path();
  std::filesystem::create_directories(dir / "cfg");
  std::ofstream(dir / "cfg" / "x.yaml") << "data:\n  train_manifest: ../d/train.jsonl\n";
  Config c = load_config((dir / "cfg" / "x.yaml").string(), {"data.dev_manifest=dev.jsonl"});
  EXPECT_EQ(c.data.train_manifest, (dir / "d" / "train.jsonl").string());
  EXPECT_EQ(c.data.dev_manifest, "dev.jsonl");
  EXPECT_THROW(load_config((dir / "missing.yaml").string()), Error);
}

TEST(Config, DecodeSection) {
  TempDir temp;
  const std::filesystem::path& dir = temp.path();
  std::filesystem::create_directories(dir / "cfg");
  std::ofstream(dir / "cfg" / "x.yaml")
      << "decode:\n  lm_path: ../lm/words.arpa\n  beam_width: 16\n  lm_weight: 0.8\n";
  Config c = load_config((dir / "cfg" / "x.yaml").string(), {"decode.word_score=2.5"});
  EXPECT_EQ(c.decode.lm_path, (dir / "lm" / "words.arpa").string());
  EXPECT_EQ(c.decode.beam_width, 16);
  EXPECT_DOUBLE_EQ(c.decode.lm_weight, 0.8);
  EXPECT_DOUBLE_EQ(c.decode.word_score, 2.5);
  // Defaults: no LM, greedy.
  const Config d = parse_config("");
  EXPECT_TRUE(d.decode.lm_path.empty());
  EXPECT_EQ(d.decode.beam_width, 0);
  EXPECT_NE(error_of("", {"decode.beam_width=-2"}).find("'decode.beam_width' must be >= 0"),
            std::string::npos);
  EXPECT_NE(error_of("", {"decode.unk_log10_prob=1"}).find("decode.unk_log10_prob"),
            std::string::npos);
  EXPECT_NE(error_of("decode:\n  lm_wieght: 1\n").find("did you mean 'decode.lm_weight'"),
            std::string::npos);
}

}  // namespace
}  // namespace ds2
