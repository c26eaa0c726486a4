// The ds2 subcommands, each a function of parsed arguments returning an exit code. Library
// errors arrive as ds2::Error and are printed by main() as one line.
#pragma once

#include <string>
#include <vector>

namespace ds2 {
struct DecodeConfig;
}

namespace ds2::cli {

// Command-line overrides of a checkpoint's decode: section (--lm, --lm-weight, --word-score,
// --beam, --greedy); only the flags given change anything.
struct DecodeArgs {
  bool greedy = false;  // ignore the configured decoder: best path, no LM
  bool set_lm = false, set_lm_weight = false, set_word_score = false, set_beam = false;
  std::string lm_path;  // relative to the current folder
  double lm_weight = 0;
  double word_score = 0;
  int beam_width = 0;
  std::string device = "auto";  // where the network runs: auto (GPU when present) | cpu | cuda
  void apply(DecodeConfig* config) const;
};

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  bool resume = false;  // must continue from run.dir's latest checkpoint (run.resume=required)
};
int train(const TrainArgs& args);

struct EvalArgs {
  std::string checkpoint;
  std::string manifest;
  int batch_size = 16;
  int threads = 2;
  int show_worst = 5;
  int show_confusions = 0;
  std::vector<double> warps;  // test-time frequency-warp search (evaluate's overload)
  std::string trn_prefix;     // write PREFIX.ref.trn / PREFIX.hyp.trn for sclite
  int adapt_bn = 0;  // passes of unsupervised batch-norm adaptation to the manifest's audio
  DecodeArgs decode;
};
int eval(const EvalArgs& args);

// Self-training on untranscribed recordings of a new voice (train/self_training.h): each round
// labels them with the current model (after AdaBN, with the decoder the flags select) and
// fine-tunes on the training set plus `repeat` copies of them; OUT/adapted.ckpt is the result.
struct AdaptArgs {
  std::string checkpoint;
  std::string manifest;                // its transcripts are never read
  std::vector<std::string> overrides;  // fine-tuning config, key.path=value
  std::string out_dir;
  int rounds = 2;
  int repeat = 3;
  int adapt_bn = 2;
  double keep = 1.0;  // fraction of labelled recordings kept, the most confident
  int batch_size = 16;
  int threads = 2;
  DecodeArgs decode;
};
int adapt(const AdaptArgs& args);

// Prints "path<TAB>text" per recording (--format text) or one JSON object per line (--format
// json: path, duration, text, confidence, words with start/end/confidence). "-" among the audio
// arguments reads one path per line from stdin; --manifest adds a manifest's audio files.
// Recordings that cannot be read are reported on stderr ("skip: ...") and make the exit code 1.
struct TranscribeArgs {
  std::string checkpoint;
  std::vector<std::string> audio;
  std::string manifest;
  std::string format = "text";  // text | json
  double window_s = 20.0;       // longer recordings are transcribed in overlapping windows
  double overlap_s = 2.0;
  int batch_size = 8;
  int threads = 2;
  int adapt_bn = 0;  // passes of unsupervised batch-norm adaptation to the recordings first
  DecodeArgs decode;
};
int transcribe(const TranscribeArgs& args);

// Scores a hypothesis trn file against a reference trn file as sclite does (ctc/trn_score.h).
struct ScoreArgs {
  std::string ref;
  std::string hyp;
  bool per_utterance = false;
};
int score(const ScoreArgs& args);

// Writes a checkpoint's weights, config and alphabet as one safetensors file
// (train/export_model.h).
struct ExportArgs {
  std::string checkpoint;
  std::string out;
};
int export_model(const ExportArgs& args);

// Runs the network over a manifest once, then decodes with every (alpha, beta) of a grid and
// prints a WER table and the best pair (fewest word errors, then fewest character errors, then
// the smallest alpha, then the beta closest to 0).
struct TuneDecoderArgs {
  std::string checkpoint;
  std::string manifest;
  DecodeArgs decode;  // --lm (or the checkpoint's decode.lm_path), --beam
  std::vector<double> alphas = {0, 0.25, 0.5, 0.75, 1, 1.5, 2, 3};
  std::vector<double> betas = {-1, 0, 1, 2, 3, 4};
  int batch_size = 16;
  int threads = 2;
};
int tune_decoder(const TuneDecoderArgs& args);

struct ValidateArgs {
  std::string config;
  std::vector<std::string> overrides;
};
int validate_data(const ValidateArgs& args);

struct ImportKaldiArgs {
  std::string dir;
  std::string manifest;
};
int import_kaldi(const ImportKaldiArgs& args);

}  // namespace ds2::cli
