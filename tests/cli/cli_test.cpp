// Runs the ds2 binary as a user would and checks exit codes and the one-line error messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/fsdd_fixture.h"
#include "support/temp_dir.h"

namespace ds2 {
namespace {

struct CliRun {
  int code;
  std::string output;
};

CliRun run(const std::string& args) {
  const std::string cmd = std::string(DS2_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WEXITSTATUS(status), out};
}

class CliTest : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  TempDir temp_;
  const std::filesystem::path& dir_ = temp_.path();
};

TEST_F(CliTest, HelpForEverySubcommand) {
  for (const char* sub : {"train", "eval", "adapt", "transcribe", "validate-data", "tune-decoder",
                          "score", "export"}) {
    CliRun r = run(std::string(sub) + " --help");
    EXPECT_EQ(r.code, 0) << sub;
    EXPECT_NE(r.output.find("Usage"), std::string::npos) << r.output;
  }
  EXPECT_NE(run("").code, 0);
  EXPECT_NE(run("fly").code, 0);
}

// ds2 adapt: a missing --out, a bad --keep and an override of a key the rounds set are refused
// with one line before anything is written.
TEST_F(CliTest, AdaptRefusesBadArgumentsInOneLine) {
  const std::string voice = write("voice.jsonl", "");
  EXPECT_NE(run("adapt x.ckpt " + voice).code, 0) << "--out is required";
  EXPECT_NE(run("adapt x.ckpt " + voice + " --out o --keep 0").code, 0);
  EXPECT_NE(run("adapt x.ckpt " + voice + " --out o --keep 1.5").code, 0);
  const std::string out = (dir_ / "adapted").string();
  CliRun r = run("adapt x.ckpt " + voice + " --out " + out + " run.dir=elsewhere");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.output, "ds2: error: self-training: key 'run.dir' is set by each round (" + out +
                          "/round-N), not by an override\n");
  EXPECT_FALSE(std::filesystem::exists(out));
}

// The GPU benchmarks refuse bad options before anything runs, and without a usable GPU (or in a
// build without CUDA) say so in one line and return 2; with a GPU the refusal is all this checks.
TEST_F(CliTest, GpuBenchmarksRefuseBadOptionsAndSayWhyTheyCannotRun) {
  for (const char* sub : {"bench rnn", "bench stack"}) {
    CliRun r = run(std::string(sub) + " --help");
    EXPECT_EQ(r.code, 0) << sub;
    EXPECT_NE(r.output.find("--hidden"), std::string::npos) << r.output;
  }
  EXPECT_NE(run("bench stack --chunk 0").code, 0);
  EXPECT_NE(run("bench stack --chunk 16,x").code, 0);
  EXPECT_NE(run("bench stack --precision fp16").code, 0);
  EXPECT_NE(run("bench stack --residual maybe").code, 0);
  EXPECT_NE(run("bench rnn --density 2").code, 0);
  EXPECT_NE(run("bench rnn --hidden 256,0").code, 0);
  EXPECT_NE(run("bench rnn --batch 4,x").code, 0);
  // Number checks name the value, not CLI11's range up to the largest double.
  CliRun bad = run("bench rnn --hidden 0");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.output.find("--hidden: must be a positive number, got '0'"), std::string::npos)
      << bad.output;
  EXPECT_EQ(bad.output.find("1797"), std::string::npos) << bad.output;
  EXPECT_EQ(bad.output.find("ds2: error: --hidden"), 0u) << bad.output;
  EXPECT_EQ(std::count(bad.output.begin(), bad.output.end(), '\n'), 1) << bad.output;
  bad = run("eval x.ckpt x.jsonl --worst -2");
  EXPECT_NE(bad.output.find("--worst: must be zero or more, got '-2'"), std::string::npos)
      << bad.output;
  bad = run("bench rnn --warmup -1");
  EXPECT_NE(bad.output.find("--warmup: must be zero or more, got '-1'"), std::string::npos)
      << bad.output;
  // Lists of hidden sizes and batches: one report per pair, in one process.
  CliRun sweep =
      run("bench rnn --hidden 64,96 --batch 1,3 --steps 4 --repeats 1 --warmup 0 "
          "--ours-only");
  if (sweep.code == 0) {
    size_t reports = 0;
    for (size_t at = sweep.output.find("ds2 bench rnn: hidden"); at != std::string::npos;
         at = sweep.output.find("ds2 bench rnn: hidden", at + 1))
      ++reports;
    EXPECT_EQ(reports, 4u) << sweep.output;
    EXPECT_NE(sweep.output.find("hidden 96, batch 3"), std::string::npos) << sweep.output;
  } else {
    EXPECT_EQ(sweep.code, 2) << sweep.output;
  }
  for (const char* sub : {"bench rnn", "bench stack"}) {
    CliRun r = run(std::string(sub) + " --steps 4 --repeats 1 --warmup 0");
    if (r.code == 0) continue;  // a GPU ran it
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_EQ(r.output.find(std::string("ds2 ") + sub + ": "), 0u) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
}

TEST_F(CliTest, ConfigErrorsAreOneLineNamingFileLineAndKey) {
  const std::string cfg = write("bad.yaml", "optim:\n  lr: 0.1\n  warmup: 3\n");
  CliRun r = run("train " + cfg);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.output, "ds2: error: " + cfg +
                          ":3: unknown key 'optim.warmup' (did you mean 'optim.warmup_steps'?)\n");
  r = run("train " + write("ok.yaml", "optim: {lr: 0.1}\n") + " train.epochz=3");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("did you mean 'train.epochs'"), std::string::npos) << r.output;
  r = run("train " + (dir_ / "missing.yaml").string());
  EXPECT_NE(r.output.find("missing.yaml: cannot open config file"), std::string::npos);
}

TEST_F(CliTest, ValidateDataNamesEveryBadUtterance) {
  testing::write_digit_manifest(dir_, "lucas", {3}, 2, "good.jsonl");
  std::ifstream good(dir_ / "good.jsonl");
  std::string line1, line2;
  std::getline(good, line1);
  std::getline(good, line2);
  // A truncated copy of a real recording.
  std::filesystem::copy_file(dir_ / "lucas_3_0.wav", dir_ / "cut.wav");
  std::filesystem::resize_file(dir_ / "cut.wav",
                               std::filesystem::file_size(dir_ / "cut.wav") - 500);
  write("train.jsonl",
        line1 + "\n" +
            "{\"audio_filepath\": \"cut.wav\", \"duration\": 0.3, \"text\": \"three\"}\n" +
            "{\"audio_filepath\": \"lucas_3_1.wav\", \"duration\": 0.3, \"text\": \"thr3e!\"}\n" +
            "{\"audio_filepath\": \"nothere.wav\", \"duration\": 1, \"text\": \"x\"}\n" +
            "{\"audio_filepath\": \"lucas_3_1.wav\", \"text\": \"three\"}\n" +
            "{\"audio_filepath\": \"lucas_3_1.wav\", \"duration\": 9.5, \"text\": \"three\"}\n");
  const std::string cfg = write("v.yaml",
                                "data: {train_manifest: train.jsonl, digits: keep}\n"
                                "features: {sample_rate: 8000}\n");
  CliRun r = run("validate-data " + cfg);
  EXPECT_EQ(r.code, 1) << r.output;
  const std::string m = (dir_ / "train.jsonl").string();
  EXPECT_NE(r.output.find(m + ":2: cut@2: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("truncated"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(m + ":3: lucas_3_1@3: characters outside the alphabet: \"3\""),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(m + ":4: nothere@4: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(m + ":5: "), std::string::npos) << r.output;  // missing duration
  EXPECT_NE(r.output.find(m + ":6: lucas_3_1@6: duration"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("6 utterances, 1 usable"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("summary: 6 utterances checked, 5 problems"), std::string::npos)
      << r.output;
  // With fatal_bad_utterances, training stops at the first bad utterance, naming it.
  r = run("train " + cfg + " data.fatal_bad_utterances=true run.dir=" + (dir_ / "run").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("ds2: error: " + m + ":"), std::string::npos) << r.output;
}

TEST_F(CliTest, ValidateDataChecksAManifestAlone) {
  // A manifest instead of a config: checked as the default config, with the overrides, uses it.
  testing::write_digit_manifest(dir_, "lucas", {3}, 1, "good.jsonl");
  std::ifstream good(dir_ / "good.jsonl");
  std::string line1;
  std::getline(good, line1);
  const std::string m = write(
      "new.jsonl", line1 + "\n" +
                       "{\"audio_filepath\": \"lucas_3_0.wav\", \"duration\": 0.3, "
                       "\"text\": \"thr3e!\"}\n" +
                       "{\"audio_filepath\": \"nothere.wav\", \"duration\": 1, \"text\": \"x\"}\n");
  CliRun r = run("validate-data " + m + " features.sample_rate=8000 data.digits=keep");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find(m + ":2: lucas_3_0@2: characters outside the alphabet: \"3\""),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(m + ":3: nothere@3: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("summary: 3 utterances checked, 2 problems"), std::string::npos)
      << r.output;
  // The good line alone passes.
  r = run("validate-data " + (dir_ / "good.jsonl").string() +
          " features.sample_rate=8000 data.digits=keep");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("summary: 1 utterances checked, 0 problems"), std::string::npos)
      << r.output;
  // Without one usable utterance, every problem is still listed.
  const std::string bad = write("bad.jsonl",
                                "{\"audio_filepath\": \"nothere.wav\", "
                                "\"duration\": 1, \"text\": \"x\"}\n{not json\n");
  r = run("validate-data " + bad + " features.sample_rate=8000");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find(bad + ":1: nothere@1: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(bad + ":2: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 utterances, 0 usable"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(bad + ": no usable utterance"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("summary: 2 utterances checked, 3 problems"), std::string::npos)
      << r.output;
  // An empty manifest is one problem, not a pass.
  r = run("validate-data " + write("empty.jsonl", "") + " features.sample_rate=8000");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("empty.jsonl: no usable utterance"), std::string::npos) << r.output;
  // A bad override is named as in a config.
  r = run("validate-data " + m + " features.sample_rat=8000");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("features.sample_rat"), std::string::npos) << r.output;
}

TEST_F(CliTest, TranscribeAndEvalReportMissingFiles) {
  CliRun r = run("transcribe " + (dir_ / "none.ckpt").string() + " a.wav");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("none.ckpt: cannot open"), std::string::npos) << r.output;
  r = run("eval " + write("junk.ckpt", "not a checkpoint at all") + " x.jsonl");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("junk.ckpt: "), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ds2

namespace ds2 {
namespace {

// The whole user path through the binary: train from a YAML file, then transcribe and evaluate
// with the checkpoint it wrote.
TEST(CliEndToEnd, TrainThenTranscribeAndEvaluate) {
  TempDir temp;
  testing::write_digit_manifest(temp.path(), "george", {1, 2, 7}, 8);
  std::ofstream(temp.path() / "tiny.yaml")
      << "run: {dir: run, seed: 3, threads: 2}\n"
         "data: {train_manifest: train.jsonl, dev_manifest: train.jsonl}\n"
         "features: {sample_rate: 8000, type: mel, n_mels: 32}\n"
         "model: {conv: [{channels: 8, kernel: [5, 5], stride: [2, 2]}], rnn_layers: 1, "
         "rnn_hidden: 48}\n"
         "optim: {lr: 0.003, schedule: constant}\n"
         "train: {epochs: 40, batch_size: 8, log_every: 30}\n";
  const std::string run_dir = (temp.path() / "run").string();
  CliRun r = run("train " + (temp.path() / "tiny.yaml").string() + " run.dir=" + run_dir);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("step 120/120"), std::string::npos) << r.output;
  const std::string wav = (temp.path() / "george_7_3.wav").string();
  r = run("transcribe " + run_dir + "/best.ckpt " + wav);
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.output, wav + "\tseven\n");
  r = run("eval " + run_dir + "/best.ckpt " + (temp.path() / "train.jsonl").string() + " --trn " +
          run_dir + "/score");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("utterances 24 (skipped 0)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" N=24)"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(run_dir + "/score.hyp.trn"));
  // Unsupervised batch-norm adaptation first, then the same scoring; a negative count is refused.
  r = run("eval " + run_dir + "/best.ckpt " + (temp.path() / "train.jsonl").string() +
          " --adapt-bn 2");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("batch-norm statistics adapted to 24 utterances of this manifest, 2 "
                          "passes (transcripts unused)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(" N=24)"), std::string::npos) << r.output;
  EXPECT_NE(run("eval " + run_dir + "/best.ckpt x.jsonl --adapt-bn -1").code, 0);
  // Confusion pairs: one line per substituted word pair, at most N, none without substitutions.
  r = run("eval " + run_dir + "/best.ckpt " + (temp.path() / "train.jsonl").string() +
          " --confusions 2");
  ASSERT_EQ(r.code, 0) << r.output;
  const size_t s_at = r.output.find("WER ");
  ASSERT_NE(s_at, std::string::npos) << r.output;
  const int substitutions = std::stoi(r.output.substr(r.output.find("(S=", s_at) + 3));
  size_t lines = 0;
  for (size_t at = r.output.find("confusion: "); at != std::string::npos;
       at = r.output.find("confusion: ", at + 1))
    ++lines;
  if (substitutions == 0) {
    EXPECT_EQ(lines, 0u) << r.output;
  } else {
    EXPECT_GE(lines, 1u) << r.output;
    EXPECT_LE(lines, std::min<size_t>(2, substitutions)) << r.output;
  }
  EXPECT_NE(run("eval " + run_dir + "/best.ckpt x.jsonl --confusions -1").code, 0);
  // The warp search: one factor of 1 scores as plain decoding; a factor out of range is refused.
  const std::string wer_line = r.output.substr(s_at, r.output.find('\n', s_at) - s_at);
  r = run("eval " + run_dir + "/best.ckpt " + (temp.path() / "train.jsonl").string() +
          " --warps 1 --confusions 2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find(wer_line), std::string::npos) << wer_line << "\n" << r.output;
  EXPECT_NE(r.output.find("frequency warps chosen (warp: utterances): 1: 24"), std::string::npos)
      << r.output;
  r = run("eval " + run_dir + "/best.ckpt " + (temp.path() / "train.jsonl").string() +
          " --warps 1,0.4");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("each frequency warp must be in (0.5, 2), got 0.4"), std::string::npos)
      << r.output;

  // Beam search with a word LM, from the command line.
  const std::string lm = (temp.path() / "digits.arpa").string();
  std::ofstream(lm) << "\\data\\\nngram 1=6\n\n\\1-grams:\n-0.6 </s>\n-99 <s>\n-3 <unk>\n"
                       "-0.5 one\n-0.5 two\n-0.5 seven\n\\end\\\n";
  r = run("transcribe " + run_dir + "/best.ckpt " + wav + " --lm " + lm + " --beam 8");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output, wav + "\tseven\n");
  const std::string manifest = (temp.path() / "train.jsonl").string();
  r = run("eval " + run_dir + "/best.ckpt " + manifest + " --lm " + lm + " --lm-weight 0.5");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("decoder: beam 32 + LM " + lm + " (alpha 0.5, beta 1)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(" N=24)"), std::string::npos) << r.output;
  r = run("tune-decoder " + run_dir + "/best.ckpt " + manifest + " --lm " + lm +
          " --alphas 1,0 --betas 0 --beam 4");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("beam 4 + LM " + lm + ": WER by alpha"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nbest: alpha "), std::string::npos) << r.output;
  r = run("tune-decoder " + run_dir + "/best.ckpt " + manifest);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.output,
            "ds2: error: tune-decoder: no language model (give --lm PATH; the checkpoint's "
            "decode.lm_path is empty)\n");
  r = run("eval " + run_dir + "/best.ckpt " + manifest + " --lm " + lm + ".missing");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.output, "ds2: error: " + lm +
                          ".missing: cannot open language model file (decode.lm_path; --lm PATH "
                          "replaces it, --greedy decodes without it)\n");
}

}  // namespace
}  // namespace ds2
