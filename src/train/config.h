// The run configuration: one YAML schema with documented defaults (configs/README.md lists every
// key). Unknown or misspelled keys are errors that name the nearest valid key; the resolved
// config (defaults + file + overrides) is written to the run folder and into every checkpoint.
//
//   ds2::Config cfg = ds2::load_config("configs/fsdd.yaml", {"optim.lr=3e-4", "train.epochs=2"});
//   std::cout << cfg.optim.lr;
//   std::string yaml = cfg.resolved_yaml;        // what to save with the run
#pragma once

#include <string>
#include <vector>

#include "audio/feature_config.h"
#include "nn/model_config.h"

namespace ds2 {

struct RunConfig {
  std::string dir = "runs/default";  // run folder: resolved config, logs, checkpoints
  int seed = 1;
  std::string device = "auto";  // auto | cpu | cuda (auto picks cuda when built and present)
  int threads = 0;              // CPU backend compute threads (0 = the cores / ranks on the host)
  std::string resume = "auto";  // auto (continue when run.dir has a checkpoint) | required | never
  bool tensorboard = true;      // also write TensorBoard scalars to RUN/tb/
};

struct DataConfig {
  std::string train_manifest;
  std::string dev_manifest;      // optional; evaluated for WER/CER and the best checkpoint
  std::string alphabet;          // file with one symbol per line; empty = English (space ' a-z)
  std::string digits = "spell";  // spell | keep: how digits in transcripts are normalized
  double min_duration_s = 0.1;
  double max_duration_s = 20.0;
  double duration_tolerance_s = 0.1;  // allowed |manifest duration - audio duration|
  bool fatal_bad_utterances = false;  // true: stop at the first bad utterance instead of skipping
  bool speaker_batches = false;       // every training batch from one speaker (manifest "speaker")
  int loader_threads = 0;             // 0: data/loader_threads.h picks
  int prefetch_batches = 4;
};

struct OptimConfig {
  std::string name = "adam";  // adam | sgd (Nesterov momentum)
  double lr = 3e-4;
  double momentum = 0.9;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double grad_clip = 400.0;         // global L2 norm; 0 = off
  int warmup_steps = 0;             // linear warm-up from 0
  std::string schedule = "cosine";  // constant | cosine | exponential
  double final_lr_ratio = 0.05;     // cosine: lr at the end = lr * final_lr_ratio
  double decay_per_epoch = 0.9;     // exponential: lr *= decay_per_epoch each epoch
};

struct TrainLoopConfig {
  int epochs = 10;
  int batch_size = 16;
  int max_steps = 0;      // 0 = no limit besides epochs
  bool sortagrad = true;  // first epoch in order of increasing duration
  int log_every = 20;     // steps
  int eval_every = 0;     // steps between dev evaluations; 0 = once per epoch
  int keep_checkpoints = 3;
  int max_consecutive_skips = 20;  // non-finite steps in a row that stop the run
  double ema_decay = 0.0;  // > 0: evaluate and save an exponential moving average of weights
  // A checkpoint whose weights, batch-norm and feature statistics a new run starts from (fine-
  // tuning; its model, features and alphabet must be this config's). Optimizer, step and
  // schedule start fresh; a run that resumes ignores it.
  std::string init_from;
  // none | dynamic: dL/dlogits is multiplied by a scale S (a power of two) and the gradients are
  // unscaled after the allreduce; a step whose gradients overflow is skipped and halves S, and
  // loss_scale_growth_interval clean steps in a row double it (up to 2^24).
  std::string loss_scaling = "none";
  double loss_scale_init = 65536;         // S at the start: a power of two in [1, 2^127]
  int loss_scale_growth_interval = 1000;  // clean steps in a row before S doubles
  // fp32 | bf16 (mixed precision, CUDA only): GEMMs with bf16 operands and fp32 accumulation,
  // persistent RNN weights on chip in bf16; master weights, gradients, optimizer state fp32.
  std::string precision = "fp32";
  // CUDA: two or more unidirectional clipped-ReLU layers in a row (no batch norm, no dropout)
  // run as a wavefront of chunks where the GPU can (bf16, batch <= 8); false: layer after layer.
  bool rnn_wavefront = true;
  // CUDA: recurrences (clipped ReLU and GRU) run as persistent kernels where their plan fits the
  // GPU; false: always the GEMM recurrence (a cuBLAS GEMM and a cell kernel per step), to compare.
  bool persistent_rnn = true;
};

// How `ds2 eval` and `ds2 transcribe` turn the model's output into text (training's dev
// evaluation always decodes greedily). Without an LM and with beam_width <= 1: greedy decoding.
struct DecodeConfig {
  int beam_width = 0;         // prefixes kept by the beam search; 0 = 1 (greedy) without an LM,
                              // 32 with one
  std::string lm_path;        // ARPA word n-gram LM for shallow fusion; empty = none
  double lm_weight = 0.5;     // alpha: weight of the LM's natural-log probability
  double word_score = 1.0;    // beta: added per word
  int top_k = 0;              // labels tried per frame, most probable first (0 = all)
  double prune = -10.0;       // labels with ln p below this are skipped in a frame
  double unk_log10_prob = 0;  // < 0: log10 P of words outside the LM; 0 = the LM's <unk>
};

// Data-parallel training (mpirun -np N ds2 train ...): ignored with one rank.
struct DistConfig {
  double timeout_s = 300;             // a collective waiting longer aborts the job (watchdog)
  double bucket_mb = 16;              // gradient allreduce bucket size (fp32 MiB)
  std::string reduce_dtype = "fp32";  // fp32 | bf16: element type of the gradient allreduce
  // Most CTAs NCCL's allreduce may occupy while backward runs beside it (0: NCCL's choice). A
  // persistent RNN kernel needs its SMs free to launch; 8 left DS2-large 4-GPU steps 2.4% faster.
  int comm_ctas = 8;
  int check_every = 0;  // debug: every N steps, check that all ranks hold identical weights
};

// Gradual magnitude pruning of the recurrent matrices (the RNN layers' ".U", both directions):
// the fraction of each matrix kept goes from 1 at start_step to `density` at end_step along
// d(t) = D + (1 - D) * (1 - p)^3, p = (t - start_step) / (end_step - start_step) (Zhu & Gupta
// 2017); the smallest-magnitude weights are masked every `every` steps in that window.
struct PruneConfig {
  double density = 1.0;    // final fraction of recurrent weights kept, in (0, 1]; 1 = off
  int64_t start_step = 0;  // the schedule starts here (density 1)
  int64_t end_step = 0;    // the final density from here on; > start_step when density < 1
  int64_t every = 100;     // steps between mask updates inside [start_step, end_step]
};

struct Config {
  RunConfig run;
  DataConfig data;
  FeatureConfig features;
  AugmentConfig augment;
  ModelConfig model;
  OptimConfig optim;
  TrainLoopConfig train;
  DecodeConfig decode;
  DistConfig dist;
  PruneConfig prune;
  std::string resolved_yaml;  // the complete configuration, every key present
  std::string source;         // the file it came from (or "<string>")
};

// Loads `path`, applies `key.path=value` overrides and validates every key and value.
// Relative manifest/alphabet/LM paths are resolved against the config file's folder.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// Same from YAML text (no file-relative path resolution); `source` names it in errors.
Config parse_config(const std::string& yaml_text, const std::vector<std::string>& overrides = {},
                    const std::string& source = "<string>");
// Every valid dotted key with its default value and one-line description.
std::string describe_config_keys();

// Every key's value as one line of YAML ("model.rnn_hidden" -> "192"), in schema order: for
// comparing two runs' configurations key by key.
std::vector<std::pair<std::string, std::string>> config_values(const Config& cfg);

}  // namespace ds2
