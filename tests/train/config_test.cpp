#include "train/config.h"

#include <gtest/gtest.h>

#include <cmath>
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
  EXPECT_NE(error_of("", {"model.batch_norm_statistics=speaker"})
                .find("key 'model.batch_norm_statistics': 'speaker' is not one of: batch, "
                      "utterance"),
            std::string::npos);
  EXPECT_NE(error_of("", {"dist.comm_ctas=-1"}).find("key 'dist.comm_ctas' must be >= 0"),
            std::string::npos);
  EXPECT_NE(error_of("", {"features.type=mfcc", "features.n_mels=12", "features.n_ceps=13"})
                .find("key 'features.n_ceps' (13) must not exceed 'features.n_mels' (12)"),
            std::string::npos);
  EXPECT_NE(error_of("", {"features.type=mfcc", "augment.freq_warp=0.1"})
                .find("key 'augment.freq_warp' warps spectral bins"),
            std::string::npos);
  EXPECT_EQ(error_of("", {"features.type=mfcc", "features.n_mels=23"}), "");
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

// Every config error is one line (the CLI prints it as is), whatever bytes the input holds.
void expect_one_line(const std::string& message) {
  EXPECT_FALSE(message.empty());
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(Config, DuplicateKeysAreErrorsNamingBothLines) {
  // yaml-cpp keeps both pairs of a repeated key; the loader used to let the last one win.
  std::string msg = error_of("optim:\n  lr: 0.1\n  lr: 0.2\n");
  EXPECT_EQ(msg, "test.yaml:3: duplicate key 'optim.lr' (first at line 2)");
  msg = error_of("optim:\n  lr: 1\ntrain:\n  epochs: 2\noptim:\n  eps: 1\n");
  EXPECT_EQ(msg, "test.yaml:5: duplicate key 'optim' (first at line 1)");
  msg = error_of("{optim: {lr: 1, \"lr\": 2}}");
  EXPECT_NE(msg.find("duplicate key 'optim.lr'"), std::string::npos) << msg;
  msg = error_of("model:\n  conv: [{channels: 2, kernel: [3, 3], channels: 3}]\n");
  EXPECT_NE(msg.find("test.yaml:2: key 'model.conv': entry 0: duplicate key 'channels'"),
            std::string::npos)
      << msg;
  // Overrides may repeat a key: the last one wins, as on any command line.
  EXPECT_DOUBLE_EQ(parse_config("", {"optim.lr=0.1", "optim.lr=0.2"}).optim.lr, 0.2);
}

TEST(Config, InvalidUtf8IsAnErrorNamingTheKey) {
  std::string msg = error_of(
      "run:\n  dir: runs/\xff"
      "x\n");
  EXPECT_EQ(msg,
            "test.yaml:2: key 'run.dir': expected a path, got text that is not valid UTF-8 (byte 6 "
            "of 'runs/\\xFFx')");
  msg = error_of("", {"data.train_manifest=a\xc3.jsonl"});
  EXPECT_NE(msg.find("override 'data.train_manifest=a\\xC3.jsonl': key 'data.train_manifest': "
                     "expected a path, got text that is not valid UTF-8"),
            std::string::npos)
      << msg;
  msg = error_of("optim:\n  l\xed\xa0\x80r: 1\n");  // an encoded UTF-16 surrogate
  EXPECT_EQ(msg, "test.yaml:2: in 'optim': key 'l\\xED\\xA0\\x80r' is not valid UTF-8 (byte 2)");
  msg = error_of("run:\n  dir: \"a\\0b\"\n");
  EXPECT_NE(msg.find("key 'run.dir': expected a path, got text with a NUL character"),
            std::string::npos)
      << msg;
  // Valid non-ASCII text is fine.
  EXPECT_EQ(parse_config("run:\n  dir: \"runs/caf\xc3\xa9\"\n").run.dir, "runs/caf\xc3\xa9");
}

TEST(Config, ValuesOfTheWrongTypeNameKeyLineAndWhatWasFound) {
  EXPECT_EQ(error_of("train:\n  epochs: [1, 2]\n"),
            "test.yaml:2: key 'train.epochs': expected an integer, got a list");
  EXPECT_EQ(error_of("run:\n  dir: {a: 1}\n"),
            "test.yaml:2: key 'run.dir': expected a path, got a map");
  EXPECT_EQ(error_of("optim:\n  lr:\n"),
            "test.yaml:2: key 'optim.lr': expected a number, got nothing (null)");
  EXPECT_EQ(error_of("train:\n  epochs: 1.5\n"),
            "test.yaml:2: key 'train.epochs': expected an integer, got '1.5'");
  EXPECT_EQ(error_of("train:\n  epochs: 99999999999\n"),
            "test.yaml:2: key 'train.epochs': expected an integer, got '99999999999'");
  EXPECT_EQ(error_of("train:\n  sortagrad: 1\n"),
            "test.yaml:2: key 'train.sortagrad': expected true or false, got '1'");
  EXPECT_EQ(error_of("optim:\n  lr: .nan\n"),
            "test.yaml:2: key 'optim.lr': expected a number, got '.nan'");
  EXPECT_EQ(error_of("model:\n  relu_clip: 1e99\n"),
            "test.yaml:2: key 'model.relu_clip': expected a number, got '1e99'");
  EXPECT_EQ(error_of("model:\n  conv: [{channels: 2, kernel: [3, x]}]\n"),
            "test.yaml:2: key 'model.conv': expected an integer, got 'x'");
  EXPECT_EQ(error_of("", {"train.batch_size=[4]"}),
            "override 'train.batch_size=[4]': key 'train.batch_size': expected an integer, got a "
            "list");
  // Keys must be names: a list or map as a key is an error, not a yaml-cpp exception.
  EXPECT_EQ(error_of("? [a, b]\n: 1\n"), "test.yaml:1: a key must be a name, got a list");
  EXPECT_EQ(error_of("optim:\n  ? {a: 1}\n  : 1\n"),
            "test.yaml:2: in 'optim': a key must be a name, got a map");
  // A section where a key is expected, and the other way round.
  EXPECT_EQ(error_of("", {"optim=1"}),
            "override 'optim=1': 'optim' is a section; set one of its keys, e.g. 'optim.lr'");
  EXPECT_NE(error_of("optim: 3\n").find("key 'optim' must be a section"), std::string::npos);
  // Scalars with line breaks are quoted on one line.
  const std::string msg = error_of("train:\n  epochs: \"1\\n2\"\n");
  EXPECT_EQ(msg, "test.yaml:2: key 'train.epochs': expected an integer, got '1\\n2'");
  expect_one_line(error_of("", {"run.device=\"a\\nb\""}));
  expect_one_line(error_of("", {"optim.lrr\n=1"}));
  expect_one_line(error_of("a: |\n  x\n  y\n"));
}

TEST(Config, LossScalingKeysAreValidatedNamingTheKey) {
  const Config d = parse_config("");
  EXPECT_EQ(d.train.loss_scaling, "none");
  EXPECT_EQ(d.train.loss_scale_init, 65536.0);
  EXPECT_EQ(d.train.loss_scale_growth_interval, 1000);
  const Config c = parse_config("train: {loss_scaling: dynamic, loss_scale_init: 1}\n",
                                {"train.loss_scale_growth_interval=1"});
  EXPECT_EQ(c.train.loss_scaling, "dynamic");
  EXPECT_EQ(c.train.loss_scale_init, 1.0);
  EXPECT_EQ(c.train.loss_scale_growth_interval, 1);

  EXPECT_EQ(error_of("", {"train.loss_scaling=static"}),
            "test.yaml: key 'train.loss_scaling': 'static' is not one of: none, dynamic");
  for (const char* bad : {"1000", "0.5", "0", "-65536", "3", ".inf", "3.4e38"}) {
    const std::string msg = error_of("", {std::string("train.loss_scale_init=") + bad});
    EXPECT_NE(msg.find("test.yaml: key 'train.loss_scale_init' must be a power of two from 1 to "
                       "2^127"),
              std::string::npos)
        << bad << ": " << msg;
    expect_one_line(msg);
  }
  EXPECT_EQ(error_of("train:\n  loss_scale_init: lots\n"),
            "test.yaml:2: key 'train.loss_scale_init': expected a number, got 'lots'");
  for (const char* bad : {"0", "-5"})
    EXPECT_NE(error_of("", {std::string("train.loss_scale_growth_interval=") + bad})
                  .find("key 'train.loss_scale_growth_interval' must be at least 1"),
              std::string::npos)
        << bad;
  EXPECT_NE(error_of("train:\n  loss_scale_inti: 8\n").find("did you mean 'train.loss_scale_init'"),
            std::string::npos);
  EXPECT_NE(error_of("", {"train.loss_scale=8"}).find("did you mean 'train.loss_scale_init'"),
            std::string::npos);
}

TEST(Config, LargePowerOfTwoLossScalesRoundTripExactly) {
  // Written with the default 15 digits, 2^120 would load back as a number that is not a power
  // of two, and a resumed run's config would be refused.
  for (int exponent : {0, 16, 24, 53, 120, 127}) {
    Config a = parse_config("");
    a.train.loss_scale_init = std::ldexp(1.0, exponent);
    std::string yaml;
    for (const auto& [key, value] : config_values(a))
      if (key == "train.loss_scale_init") yaml = "train: {loss_scale_init: " + value + "}\n";
    const Config c = parse_config(yaml);
    EXPECT_EQ(c.train.loss_scale_init, std::ldexp(1.0, exponent)) << yaml;
  }
  EXPECT_NE(describe_config_keys().find("train.loss_scale_init = 65536    #"), std::string::npos);
}

TEST(Config, InfiniteValuesRoundTrip) {
  // The resolved config wrote printf's "-inf", which does not load back as a number.
  const Config a = parse_config("decode:\n  prune: -.inf\ndata:\n  max_duration_s: .inf\n");
  EXPECT_TRUE(std::isinf(a.decode.prune) && a.decode.prune < 0);
  const Config b = parse_config(a.resolved_yaml);
  EXPECT_EQ(b.resolved_yaml, a.resolved_yaml);
  EXPECT_TRUE(std::isinf(b.data.max_duration_s) && b.data.max_duration_s > 0);
}

// Inputs that once escaped as yaml-cpp exceptions or multi-line messages (found by fuzz_config;
// the files are in tests/fuzz/corpus/config/crash-*).
TEST(Config, HostileBytesGiveOneLineDs2Errors) {
  EXPECT_EQ(error_of("? :"), "test.yaml:1: a key must be a name, got a map");
  EXPECT_EQ(error_of("~: 1"), "test.yaml:1: a key must be a name, got nothing (null)");
  // yaml-cpp 0.7 (Debian 12) reads "\r:" as the key "\r", 0.8 as a null key: one line either way.
  const std::string cr = error_of("\r:");
  EXPECT_TRUE(cr == "test.yaml:1: unknown key '\\r' (did you mean 'run'?)" ||
              cr == "test.yaml:1: a key must be a name, got nothing (null)")
      << cr;
  const std::string msg = error_of(std::string("\xff\0\r", 3));
  EXPECT_EQ(msg.rfind("test.yaml:1: invalid YAML: unknown escape character: \\r", 0), 0u) << msg;
  expect_one_line(msg);
  expect_one_line(error_of("optim:\n  \"lr\\n\": 1\n"));
  // yaml-cpp stops at 2000 levels with the message "bad file"; say what is wrong instead.
  EXPECT_EQ(error_of(std::string(100000, '[')), "test.yaml:1: invalid YAML: nested too deeply");
  EXPECT_NE(error_of("", {"model.conv=" + std::string(5000, '{')}).find("nested too deeply"),
            std::string::npos);
}

}  // namespace
}  // namespace ds2
