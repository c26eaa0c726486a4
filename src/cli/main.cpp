// ds2: train, evaluate and run Deep Speech 2-style speech recognition models.
//   ds2 train configs/fsdd.yaml optim.lr=3e-4
//   ds2 eval runs/fsdd/best.ckpt data/test.jsonl
//   ds2 transcribe runs/fsdd/best.ckpt a.wav b.flac
//   ds2 validate-data configs/fsdd.yaml
//   ds2 bench step configs/ds2-large.yaml --batch 4 --seconds 10
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "cli/bench_command.h"
#include "cli/commands.h"
#include "core/error.h"
#include "train/config.h"

int main(int argc, char** argv) {
  CLI::App app{"ds2: Deep Speech 2-style speech recognition trainer"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");

  ds2::cli::TrainArgs train;
  auto* train_cmd = app.add_subcommand("train", "Train a model from a YAML config");
  train_cmd->add_option("config", train.config, "YAML config file")->required();
  train_cmd->add_option("overrides", train.overrides, "key.path=value overrides");

  ds2::cli::EvalArgs eval;
  auto* eval_cmd = app.add_subcommand("eval", "WER and CER of a checkpoint on a manifest");
  eval_cmd->add_option("checkpoint", eval.checkpoint, "Checkpoint file")->required();
  eval_cmd->add_option("manifest", eval.manifest, "JSON-lines manifest")->required();
  eval_cmd->add_option("--batch-size", eval.batch_size, "Utterances per batch")
      ->check(CLI::PositiveNumber);
  eval_cmd->add_option("--threads", eval.threads, "Loader threads")->check(CLI::PositiveNumber);
  eval_cmd->add_option("--worst", eval.show_worst, "Print the N worst utterances");
  eval_cmd->add_option("--trn", eval.trn_prefix, "Write PREFIX.ref.trn and PREFIX.hyp.trn");

  ds2::cli::TranscribeArgs tr;
  auto* tr_cmd = app.add_subcommand("transcribe", "Print path<TAB>text for audio files");
  tr_cmd->add_option("checkpoint", tr.checkpoint, "Checkpoint file")->required();
  tr_cmd->add_option("audio", tr.audio, "Audio files (any format libsndfile reads)")->required();
  tr_cmd->add_option("--batch-size", tr.batch_size, "Files per batch")->check(CLI::PositiveNumber);
  tr_cmd->add_option("--threads", tr.threads, "Loader threads")->check(CLI::PositiveNumber);

  ds2::cli::ValidateArgs val;
  auto* val_cmd = app.add_subcommand("validate-data", "Check every utterance a config would use");
  val_cmd->add_option("config", val.config, "YAML config file")->required();
  val_cmd->add_option("overrides", val.overrides, "key.path=value overrides");

  ds2::cli::ImportKaldiArgs kaldi;
  auto* kaldi_cmd =
      app.add_subcommand("import-kaldi", "Convert a Kaldi data dir (wav.scp + text) to a manifest");
  kaldi_cmd->add_option("dir", kaldi.dir, "Kaldi data directory")->required();
  kaldi_cmd->add_option("manifest", kaldi.manifest, "Output JSON-lines manifest")->required();

  ds2::cli::BenchStepArgs bench;
  auto* bench_cmd = app.add_subcommand("bench", "Benchmarks (ours beside the reference)");
  bench_cmd->require_subcommand(1);
  auto* bench_step_cmd = bench_cmd->add_subcommand(
      "step", "Training-step speed of a config's model on synthetic utterances");
  bench_step_cmd->add_option("config", bench.config, "YAML config file")->required();
  bench_step_cmd->add_option("overrides", bench.overrides, "key.path=value overrides");
  bench_step_cmd
      ->add_option("--batch", bench.options.batch, "Utterances per step (default: config)")
      ->check(CLI::PositiveNumber);
  bench_step_cmd->add_option("--seconds", bench.options.seconds, "Audio seconds per utterance")
      ->check(CLI::PositiveNumber);
  bench_step_cmd->add_option("--steps", bench.options.steps, "Timed steps")
      ->check(CLI::PositiveNumber);
  bench_step_cmd->add_option("--warmup", bench.options.warmup, "Untimed steps first")
      ->check(CLI::NonNegativeNumber);

  auto* keys_cmd = app.add_subcommand("config-keys", "List every config key with its default");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (*train_cmd) return ds2::cli::train(train);
    if (*eval_cmd) return ds2::cli::eval(eval);
    if (*tr_cmd) return ds2::cli::transcribe(tr);
    if (*val_cmd) return ds2::cli::validate_data(val);
    if (*kaldi_cmd) return ds2::cli::import_kaldi(kaldi);
    if (*bench_step_cmd) return ds2::cli::bench_step(bench);
    if (*keys_cmd) {
      std::cout << ds2::describe_config_keys();
      return 0;
    }
  } catch (const ds2::Error& e) {
    std::cerr << "ds2: error: " << e.what() << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "ds2: internal error: " << e.what() << std::endl;
    return 3;
  }
  return 0;
}
