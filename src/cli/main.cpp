// ds2: train, evaluate and run Deep Speech 2-style speech recognition models.
//   ds2 train configs/fsdd.yaml optim.lr=3e-4
//   ds2 eval runs/fsdd/best.ckpt data/test.jsonl
//   ds2 adapt runs/fsdd/best.ckpt new-voice.jsonl --out runs/fsdd-adapted
//   ds2 transcribe runs/fsdd/best.ckpt a.wav b.flac [--format json]
//   ds2 score test.ref.trn test.hyp.trn
//   ds2 export runs/fsdd/best.ckpt fsdd.safetensors
//   ds2 validate-data configs/fsdd.yaml
//   ds2 validate-data data/new.jsonl features.sample_rate=8000
//   ds2 bench step configs/ds2-large.yaml --batch 4 --seconds 10
//   ds2 bench rnn --hidden 1152 --batch 4 --steps 256
//   ds2 tune-decoder runs/fsdd/best.ckpt data/dev.jsonl --lm lm.arpa --alphas 0.5,1 --betas 0,2
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <vector>

#include "cli/bench_command.h"
#include "cli/commands.h"
#include "cli/gpu_bench_commands.h"
#include "cli/number_validators.h"
#include "core/blas_kernels.h"
#include "core/error.h"
#include "dist/world.h"
#include "train/config.h"

namespace {

// --lm, --lm-weight, --word-score, --beam (and --greedy unless `tuning`).
void add_decode_options(CLI::App* cmd, ds2::cli::DecodeArgs* d, bool tuning = false) {
  cmd->add_option("--device", d->device,
                  "Where the network runs: auto (GPU when present), cpu, cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_option_function<std::string>(
      "--lm",
      [d](const std::string& v) {
        d->lm_path = v;
        d->set_lm = true;
      },
      "ARPA word LM fused into a beam search (overrides decode.lm_path; '' = none)");
  cmd->add_option_function<double>(
      "--lm-weight",
      [d](double v) {
        d->lm_weight = v;
        d->set_lm_weight = true;
      },
      "LM weight alpha (decode.lm_weight)");
  cmd->add_option_function<double>(
      "--word-score",
      [d](double v) {
        d->word_score = v;
        d->set_word_score = true;
      },
      "Per-word bonus beta (decode.word_score)");
  cmd->add_option_function<int>(
         "--beam",
         [d](int v) {
           d->beam_width = v;
           d->set_beam = true;
         },
         "Beam width (decode.beam_width; 1 without an LM = greedy)")
      ->check(ds2::cli::kPositive);
  if (!tuning)
    cmd->add_flag("--greedy", d->greedy, "Best-path decoding, ignoring the decode: section");
}

}  // namespace

int main(int argc, char** argv) {
  ds2::rerun_with_better_blas_kernels(argv);
  CLI::App app{"ds2: Deep Speech 2-style speech recognition trainer"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");

  ds2::cli::TrainArgs train;
  auto* train_cmd = app.add_subcommand("train", "Train a model from a YAML config");
  train_cmd->add_option("config", train.config, "YAML config file")->required();
  train_cmd->add_option("overrides", train.overrides, "key.path=value overrides");
  train_cmd->add_flag("--resume", train.resume,
                      "Continue from run.dir's latest checkpoint (an error when there is none); "
                      "without it a run folder with a checkpoint is resumed too (run.resume)");

  ds2::cli::EvalArgs eval;
  auto* eval_cmd = app.add_subcommand("eval", "WER and CER of a checkpoint on a manifest");
  eval_cmd->add_option("checkpoint", eval.checkpoint, "Checkpoint file")->required();
  eval_cmd->add_option("manifest", eval.manifest, "JSON-lines manifest")->required();
  eval_cmd->add_option("--batch-size", eval.batch_size, "Utterances per batch")
      ->check(ds2::cli::kPositive);
  eval_cmd->add_option("--threads", eval.threads, "Loader and decoder threads")
      ->check(ds2::cli::kPositive);
  eval_cmd->add_option("--worst", eval.show_worst, "Print the N worst utterances")
      ->check(ds2::cli::kNonNegative);
  eval_cmd
      ->add_option("--warps", eval.warps,
                   "Comma-separated frequency warps tried on every utterance (e.g. "
                   "0.92,0.96,1,1.04,1.08,1.12,1.16); each is decoded from the one the model is "
                   "surest of")
      ->delimiter(',');
  eval_cmd
      ->add_option("--confusions", eval.show_confusions,
                   "Print the N most frequent word substitutions (reference -> recognized)")
      ->check(ds2::cli::kNonNegative);
  eval_cmd->add_option("--trn", eval.trn_prefix, "Write PREFIX.ref.trn and PREFIX.hyp.trn");
  eval_cmd
      ->add_option("--adapt-bn", eval.adapt_bn,
                   "First re-estimate batch-norm statistics on the manifest's audio, N passes "
                   "(unsupervised adaptation: transcripts unused; not for models with "
                   "per-utterance statistics, which have none)")
      ->check(ds2::cli::kNonNegative);
  add_decode_options(eval_cmd, &eval.decode);

  ds2::cli::TranscribeArgs tr;
  auto* tr_cmd = app.add_subcommand(
      "transcribe", "Print path<TAB>text (or JSON with word timings) for audio files");
  tr_cmd->add_option("checkpoint", tr.checkpoint, "Checkpoint file")->required();
  tr_cmd->add_option("audio", tr.audio,
                     "Audio files (any format libsndfile reads); '-' reads paths from stdin");
  tr_cmd->add_option("--manifest", tr.manifest, "Also transcribe a manifest's audio files");
  tr_cmd->add_option("--format", tr.format, "text: path<TAB>text; json: one object per line")
      ->check(CLI::IsMember({"text", "json"}));
  tr_cmd->add_option("--window", tr.window_s, "Longer recordings go in windows of this many s")
      ->check(ds2::cli::kNonNegative)
      ->capture_default_str();
  tr_cmd->add_option("--overlap", tr.overlap_s, "Seconds of overlap between windows")
      ->check(ds2::cli::kNonNegative)
      ->capture_default_str();
  tr_cmd->add_option("--batch-size", tr.batch_size, "Files per batch")->check(ds2::cli::kPositive);
  tr_cmd
      ->add_option("--adapt-bn", tr.adapt_bn,
                   "First re-estimate batch-norm statistics on these recordings, N passes (for "
                   "many recordings of one new voice; unsupervised; not for models with "
                   "per-utterance statistics)")
      ->check(ds2::cli::kNonNegative);
  tr_cmd->add_option("--threads", tr.threads, "Loader and decoder threads")
      ->check(ds2::cli::kPositive);
  add_decode_options(tr_cmd, &tr.decode);

  ds2::cli::AdaptArgs adapt;
  auto* adapt_cmd = app.add_subcommand(
      "adapt",
      "Self-train on untranscribed recordings of a new voice: label them with the model, "
      "fine-tune on them and the training set, repeat");
  adapt_cmd->add_option("checkpoint", adapt.checkpoint, "Checkpoint to adapt")->required();
  adapt_cmd
      ->add_option("manifest", adapt.manifest,
                   "JSON-lines manifest of the new voice's recordings (transcripts unused; not "
                   "the recordings you test on)")
      ->required();
  adapt_cmd->add_option("overrides", adapt.overrides,
                        "key.path=value overrides of the fine-tuning config (defaults: "
                        "train.epochs=4 optim.lr=3e-4 optim.warmup_steps=50)");
  adapt_cmd->add_option("--out", adapt.out_dir, "Folder for the rounds and adapted.ckpt")
      ->required();
  adapt_cmd->add_option("--rounds", adapt.rounds, "Label-and-fine-tune rounds")
      ->check(ds2::cli::kPositive)
      ->capture_default_str();
  adapt_cmd
      ->add_option("--repeat", adapt.repeat,
                   "Copies of the pseudo-labelled recordings beside the training set")
      ->check(ds2::cli::kPositive)
      ->capture_default_str();
  adapt_cmd
      ->add_option("--adapt-bn", adapt.adapt_bn,
                   "Batch-norm adaptation passes over the recordings before labelling them "
                   "(skipped for models with per-utterance statistics)")
      ->check(ds2::cli::kNonNegative)
      ->capture_default_str();
  adapt_cmd
      ->add_option("--keep", adapt.keep,
                   "Fraction of the labelled recordings kept for training: those the model is "
                   "most confident of")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  adapt_cmd->add_option("--batch-size", adapt.batch_size, "Utterances per labelling batch")
      ->check(ds2::cli::kPositive);
  adapt_cmd->add_option("--threads", adapt.threads, "Loader and decoder threads for labelling")
      ->check(ds2::cli::kPositive);
  add_decode_options(adapt_cmd, &adapt.decode);

  ds2::cli::TuneDecoderArgs tune;
  auto* tune_cmd = app.add_subcommand(
      "tune-decoder", "Grid-search the LM weight (alpha) and word score (beta) on a manifest");
  tune_cmd->add_option("checkpoint", tune.checkpoint, "Checkpoint file")->required();
  tune_cmd->add_option("manifest", tune.manifest, "JSON-lines manifest (a dev set, not test)")
      ->required();
  add_decode_options(tune_cmd, &tune.decode, /*tuning=*/true);
  tune_cmd->add_option("--alphas", tune.alphas, "LM weights to try, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  tune_cmd->add_option("--betas", tune.betas, "Word scores to try, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  tune_cmd->add_option("--batch-size", tune.batch_size, "Utterances per batch")
      ->check(ds2::cli::kPositive);
  tune_cmd->add_option("--threads", tune.threads, "Loader and decoder threads")
      ->check(ds2::cli::kPositive);

  ds2::cli::ScoreArgs score;
  auto* score_cmd =
      app.add_subcommand("score", "WER of a hypothesis trn file against a reference, as sclite");
  score_cmd->add_option("ref", score.ref, "Reference trn file (\"text (id)\" lines)")->required();
  score_cmd->add_option("hyp", score.hyp, "Hypothesis trn file")->required();
  score_cmd->add_flag("--per-utterance", score.per_utterance, "Print each utterance's counts");

  ds2::cli::ExportArgs exp;
  auto* export_cmd = app.add_subcommand(
      "export", "Write a checkpoint's weights, config and alphabet as one safetensors file");
  export_cmd->add_option("checkpoint", exp.checkpoint, "Checkpoint file")->required();
  export_cmd->add_option("out", exp.out, "Output .safetensors file")->required();

  ds2::cli::ValidateArgs val;
  auto* val_cmd = app.add_subcommand("validate-data", "Check every utterance a config would use");
  val_cmd
      ->add_option("config", val.config,
                   "YAML config file, or one JSON-lines manifest (.jsonl, .json) checked with the "
                   "default config and the overrides")
      ->required();
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
      ->check(ds2::cli::kPositive);
  bench_step_cmd->add_option("--seconds", bench.options.seconds, "Audio seconds per utterance")
      ->check(ds2::cli::kPositive);
  bench_step_cmd->add_option("--steps", bench.options.steps, "Timed steps")
      ->check(ds2::cli::kPositive);
  bench_step_cmd->add_option("--warmup", bench.options.warmup, "Untimed steps first")
      ->check(ds2::cli::kNonNegative);
  ds2::cli::BenchLoaderArgs bench_loader;
  auto* bench_loader_cmd = bench_cmd->add_subcommand(
      "loader", "Data loader speed on the training manifest (read, augment, featurize)");
  bench_loader_cmd->add_option("config", bench_loader.config, "YAML config file")->required();
  bench_loader_cmd->add_option("overrides", bench_loader.overrides, "key.path=value overrides");
  bench_loader_cmd->add_option("--batches", bench_loader.options.batches, "Timed batches")
      ->check(ds2::cli::kPositive);
  bench_loader_cmd
      ->add_option("--hold-ms", bench_loader.options.hold_ms,
                   "Hold each batch this long, as a training step would")
      ->check(ds2::cli::kNonNegative);
  bool no_augment = false;
  bench_loader_cmd->add_flag("--no-augment", no_augment, "Featurize without augmentation");
  ds2::RnnBenchOptions bench_rnn;
  // Lists run every (hidden, batch) pair in one process, one report each (sweeps).
  std::vector<int> bench_rnn_hidden = {bench_rnn.hidden}, bench_rnn_batch = {bench_rnn.batch};
  auto* bench_rnn_cmd = bench_cmd->add_subcommand(
      "rnn", "RNN recurrence µs/step: persistent kernel vs GEMM RNN vs cuDNN (CUDA builds)");
  bench_rnn_cmd->add_option("--hidden", bench_rnn_hidden, "Hidden size H (comma list: each)")
      ->delimiter(',')
      ->check(ds2::cli::kPositive)
      ->capture_default_str();
  bench_rnn_cmd->add_option("--batch", bench_rnn_batch, "Batch size B (comma list: each)")
      ->delimiter(',')
      ->check(ds2::cli::kPositive)
      ->capture_default_str();
  bench_rnn_cmd->add_option("--steps", bench_rnn.steps, "Timesteps T")
      ->check(ds2::cli::kPositive)
      ->capture_default_str();
  bench_rnn_cmd
      ->add_option("--precision", bench_rnn.precision,
                   "fp32 or bf16 (our weights on chip, cuDNN data)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  bench_rnn_cmd
      ->add_option("--density", bench_rnn.density,
                   "Keep this fraction of U (random mask); < 1 adds the sparse persistent kernel")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  bench_rnn_cmd
      ->add_option(
          "--cell", bench_rnn.cell,
          "relu (DS2's clipped ReLU) or gru (dense, fp32 or bf16: persistent GRU vs cuDNN GRU)")
      ->check(CLI::IsMember({"relu", "gru"}))
      ->capture_default_str();
  bench_rnn_cmd->add_flag("--ours-only", bench_rnn.ours_only,
                          "Our persistent rows only, for sweeps: no GEMM recurrence or cuDNN rows");
  bench_rnn_cmd->add_option("--repeats", bench_rnn.repeats, "Timed runs (median)")
      ->check(ds2::cli::kPositive)
      ->capture_default_str();
  bench_rnn_cmd->add_option("--warmup", bench_rnn.warmup, "Untimed runs first")
      ->check(ds2::cli::kNonNegative)
      ->capture_default_str();

  ds2::StackBenchOptions bench_stack;
  auto* bench_stack_cmd = bench_cmd->add_subcommand(
      "stack", "Unidirectional persistent RNN stack: layer after layer vs wavefront (CUDA builds)");
  bench_stack_cmd->add_option("--layers", bench_stack.layers, "Layers L")
      ->check(ds2::cli::kPositive)
      ->capture_default_str();
  bench_stack_cmd->add_option("--hidden", bench_stack.hidden, "Width H of every layer")
      ->check(ds2::cli::kPositive)
      ->capture_default_str();
  bench_stack_cmd->add_option("--batch", bench_stack.batch, "Batch size B")
      ->check(ds2::cli::kPositive)
      ->capture_default_str();
  bench_stack_cmd->add_option("--steps", bench_stack.steps, "Timesteps T")
      ->check(ds2::cli::kPositive)
      ->capture_default_str();
  bench_stack_cmd
      ->add_option("--chunk", bench_stack.chunks, "Wavefront chunk sizes in steps (comma list)")
      ->delimiter(',')
      ->check(ds2::cli::kPositive)
      ->capture_default_str();
  bench_stack_cmd
      ->add_option("--precision", bench_stack.precision,
                   "fp32 or bf16 (GEMMs and persistent kernel; the wavefront needs bf16)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  bench_stack_cmd
      ->add_option("--residual", bench_stack.residual,
                   "true: y = h + x around every layer; false: none (cuDNN's stack, checked)")
      ->capture_default_str();
  bench_stack_cmd->add_option("--repeats", bench_stack.repeats, "Timed passes (median)")
      ->check(ds2::cli::kPositive)
      ->capture_default_str();
  bench_stack_cmd->add_option("--warmup", bench_stack.warmup, "Untimed passes first")
      ->check(ds2::cli::kNonNegative)
      ->capture_default_str();

  auto* keys_cmd = app.add_subcommand("config-keys", "List every config key with its default");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --help-all
    // One line, as every other error of the command line.
    std::cerr << "ds2: error: " << e.what() << " (ds2 --help-all lists every option)" << std::endl;
    return e.get_exit_code();
  }
  // Under mpirun, every rank runs this; a rank that fails ends the whole job (MPI_Abort) so the
  // others do not wait for it in their next collective.
  auto fail = [](const std::string& kind, const char* what, int code) {
    ds2::dist::World& world = ds2::dist::World::get();
    if (world.distributed()) world.abort(kind + what, code);
    std::cerr << "ds2: " << kind << what << std::endl;
    return code;
  };
  try {
    if (*train_cmd) {
      const int rc = ds2::cli::train(train);
      ds2::dist::World::shutdown();
      return rc;
    }
    if (*eval_cmd) return ds2::cli::eval(eval);
    if (*adapt_cmd) {
      const int rc = ds2::cli::adapt(adapt);
      ds2::dist::World::shutdown();
      return rc;
    }
    if (*tr_cmd) return ds2::cli::transcribe(tr);
    if (*tune_cmd) return ds2::cli::tune_decoder(tune);
    if (*score_cmd) return ds2::cli::score(score);
    if (*export_cmd) return ds2::cli::export_model(exp);
    if (*val_cmd) return ds2::cli::validate_data(val);
    if (*kaldi_cmd) return ds2::cli::import_kaldi(kaldi);
    if (*bench_step_cmd) {
      const int rc = ds2::cli::bench_step(bench);
      ds2::dist::World::shutdown();
      return rc;
    }
    if (*bench_loader_cmd) {
      bench_loader.options.augment = !no_augment;
      return ds2::cli::bench_loader(bench_loader);
    }
    if (*bench_rnn_cmd) return ds2::cli::bench_rnn(bench_rnn, bench_rnn_hidden, bench_rnn_batch);
    if (*bench_stack_cmd) return ds2::cli::bench_stack(bench_stack);
    if (*keys_cmd) {
      std::cout << ds2::describe_config_keys();
      return 0;
    }
  } catch (const ds2::Error& e) {
    return fail("error: ", e.what(), 1);
  } catch (const std::exception& e) {
    return fail("internal error: ", e.what(), 3);
  }
  return 0;
}
