#include "train/config.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <type_traits>

#include "core/error.h"
#include "core/utf8.h"

namespace ds2 {
namespace {

// One dotted key of the schema: how to read it from YAML into a Config, how to write it back.
struct Field {
  std::string key;
  std::string doc;
  std::function<void(Config&, const YAML::Node&)> set;
  std::function<YAML::Node(const Config&)> get;
};

// What a YAML node holds, for messages: "a map", "a list", "nothing (null)", "'text'".
std::string describe_node(const YAML::Node& node) {
  if (node.IsMap()) return "a map";
  if (node.IsSequence()) return "a list";
  if (node.IsScalar()) return "'" + printable(node.Scalar()) + "'";
  return "nothing (null)";
}

template <typename T>
T scalar_as(const YAML::Node& node, const char* what) {
  DS2_CHECK(node.IsScalar(), "expected " << what << ", got " << describe_node(node));
  if constexpr (std::is_same_v<T, std::string>) {
    // yaml-cpp passes the bytes of a UTF-8 document through unchecked.
    const std::string& text = node.Scalar();
    size_t bad = 0;
    DS2_CHECK(is_valid_utf8(text, &bad),
              "expected " << what << ", got text that is not valid UTF-8 "
                          << "(byte " << bad + 1 << " of '" << printable(text) << "')");
    DS2_CHECK(
        text.find('\0') == std::string::npos,
        "expected " << what << ", got text with a NUL character: '" << printable(text) << "'");
    return text;
  } else {
    T value{};
    try {
      value = node.as<T>();
    } catch (const YAML::Exception&) {
      DS2_FAIL("expected " << what << ", got " << describe_node(node));
    }
    if constexpr (std::is_floating_point_v<T>) {
      DS2_CHECK(!std::isnan(value), "expected " << what << ", got " << describe_node(node));
    }
    return value;
  }
}

// The name of a map key; keys must be plain text (not lists, maps or null).
std::string key_name(const YAML::Node& key) {
  DS2_CHECK(key.IsScalar(), "a key must be a name, got " << describe_node(key));
  size_t bad = 0;
  DS2_CHECK(is_valid_utf8(key.Scalar(), &bad),
            "key '" << printable(key.Scalar()) << "' is not valid UTF-8 (byte " << bad + 1 << ")");
  return key.Scalar();
}

// Remembers the keys of one YAML map; a second occurrence is an error (yaml-cpp keeps both and
// would let the last silently win, while node[key] lookups return the first).
class DuplicateKeyCheck {
 public:
  // Throws when `name` was seen before in this map; `line` is 1-based (0 = unknown).
  void add(const std::string& name, const std::string& shown, int line) {
    auto [it, inserted] = first_line_.emplace(name, line);
    if (inserted) return;
    if (it->second > 0) {
      DS2_FAIL("duplicate key '" << printable(shown) << "' (first at line " << it->second << ")");
    }
    DS2_FAIL("duplicate key '" << printable(shown) << "'");
  }

 private:
  std::map<std::string, int> first_line_;
};

// yaml-cpp's reason for rejecting a document, on one line. (Its depth limit says "bad file".)
std::string yaml_error(const YAML::Exception& e) {
  if (dynamic_cast<const YAML::DeepRecursion*>(&e)) return "nested too deeply";
  return printable(e.msg);
}

int line_of(const YAML::Node& node) {
  return node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
}

// yaml-cpp formats doubles with 17 digits (0.0003 -> 0.00029999999999999997); keep them short.
YAML::Node to_node(double v) {
  // printf's "inf" is not a YAML number; the resolved config must load back ("prune: -.inf").
  if (std::isinf(v)) return YAML::Node(std::string(v > 0 ? ".inf" : "-.inf"));
  char text[32];
  std::snprintf(text, sizeof text, "%.15g", v);
  return YAML::Node(std::string(text));
}
YAML::Node to_node(float v) {
  return to_node(static_cast<double>(v));
}
// Shortest text that reads back as exactly `v` (17 significant digits always do).
YAML::Node exact_node(double v) {
  char text[32];
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, v);
    if (std::strtod(text, nullptr) == v) break;
  }
  return YAML::Node(std::string(text));
}
template <typename T>
YAML::Node to_node(const T& v) {
  return YAML::Node(v);
}

#define DS2_FIELD(KEY, MEMBER, TYPE, WHAT, DOC)                                            \
  Field {                                                                                  \
    KEY, DOC, [](Config& c, const YAML::Node& n) { c.MEMBER = scalar_as<TYPE>(n, WHAT); }, \
        [](const Config& c) { return to_node(c.MEMBER); }                                  \
  }

YAML::Node conv_to_yaml(const std::vector<ConvLayerConfig>& convs) {
  YAML::Node list(YAML::NodeType::Sequence);
  for (const auto& c : convs) {
    YAML::Node n;
    n["channels"] = c.channels;
    n["kernel"].push_back(c.kernel_time);
    n["kernel"].push_back(c.kernel_freq);
    n["stride"].push_back(c.stride_time);
    n["stride"].push_back(c.stride_freq);
    n["kernel"].SetStyle(YAML::EmitterStyle::Flow);
    n["stride"].SetStyle(YAML::EmitterStyle::Flow);
    list.push_back(n);
  }
  return list;
}

std::vector<ConvLayerConfig> conv_from_yaml(const YAML::Node& node) {
  DS2_CHECK(node.IsSequence() || node.IsNull(),
            "expected a list of {channels, kernel: [time, freq], stride: [time, freq]}");
  std::vector<ConvLayerConfig> out;
  if (node.IsNull()) return out;
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node& n = node[i];
    DS2_CHECK(n.IsMap(), "entry " << i << ": expected a map with channels, kernel, stride");
    DuplicateKeyCheck seen;
    for (const auto& kv : n) {
      try {
        const std::string k = key_name(kv.first);
        DS2_CHECK(k == "channels" || k == "kernel" || k == "stride",
                  "unknown key '" << printable(k) << "' (valid: channels, kernel, stride)");
        seen.add(k, k, line_of(kv.first));
      } catch (const Error& e) {
        DS2_FAIL("entry " << i << ": " << e.what());
      }
    }
    ConvLayerConfig c;
    if (n["channels"]) c.channels = scalar_as<int>(n["channels"], "an integer");
    auto pair = [&](const char* k, int& t, int& f) {
      if (!n[k]) return;
      DS2_CHECK(n[k].IsSequence() && n[k].size() == 2,
                "entry " << i << ": '" << k << "' must be [time, frequency]");
      t = scalar_as<int>(n[k][0], "an integer");
      f = scalar_as<int>(n[k][1], "an integer");
    };
    pair("kernel", c.kernel_time, c.kernel_freq);
    pair("stride", c.stride_time, c.stride_freq);
    DS2_CHECK(c.channels > 0 && c.kernel_time > 0 && c.kernel_freq > 0 && c.stride_time > 0 &&
                  c.stride_freq > 0,
              "entry " << i << ": channels, kernel and stride must be positive");
    out.push_back(c);
  }
  return out;
}

const std::vector<Field>& schema() {
  static const std::vector<Field> fields = {
      DS2_FIELD("run.dir", run.dir, std::string, "a path", "run folder: config, log, checkpoints"),
      DS2_FIELD("run.seed", run.seed, int, "an integer", "seed of every random decision"),
      DS2_FIELD("run.device", run.device, std::string, "a string", "auto | cpu | cuda"),
      DS2_FIELD("run.threads", run.threads, int, "an integer",
                "CPU compute threads (0 = the cores, shared among the host's ranks)"),
      DS2_FIELD("run.resume", run.resume, std::string, "a string",
                "auto (continue when run.dir has a checkpoint) | required | never"),
      DS2_FIELD("run.tensorboard", run.tensorboard, bool, "true or false",
                "write TensorBoard event files (scalars) to RUN/tb/"),
      DS2_FIELD("data.train_manifest", data.train_manifest, std::string, "a path",
                "JSON-lines manifest of the training set"),
      DS2_FIELD("data.dev_manifest", data.dev_manifest, std::string, "a path",
                "JSON-lines manifest for WER/CER during training (optional)"),
      DS2_FIELD("data.alphabet", data.alphabet, std::string, "a path",
                "alphabet file, one symbol a line ('<space>' for space); empty = English"),
      DS2_FIELD("data.digits", data.digits, std::string, "a string",
                "spell | keep: digits in transcripts spelled out as words or kept"),
      DS2_FIELD("data.min_duration_s", data.min_duration_s, double, "a number",
                "shorter utterances are skipped"),
      DS2_FIELD("data.max_duration_s", data.max_duration_s, double, "a number",
                "longer utterances are skipped"),
      DS2_FIELD("data.duration_tolerance_s", data.duration_tolerance_s, double, "a number",
                "allowed difference between manifest and audio duration"),
      DS2_FIELD("data.fatal_bad_utterances", data.fatal_bad_utterances, bool, "true or false",
                "stop on the first bad utterance instead of skipping and counting it"),
      DS2_FIELD("data.speaker_batches", data.speaker_batches, bool, "true or false",
                "every training batch from one speaker (the manifests' \"speaker\" key), so "
                "batch norm trains on one voice's statistics at a time"),
      DS2_FIELD("data.loader_threads", data.loader_threads, int, "an integer",
                "worker threads reading and featurizing audio (0 = one per core, less one for the "
                "trainer, shared among the host's ranks, 2-16)"),
      DS2_FIELD("data.prefetch_batches", data.prefetch_batches, int, "an integer",
                "batches prepared ahead of the trainer (at least loader_threads + 1 slots)"),
      DS2_FIELD("features.sample_rate", features.sample_rate, int, "an integer",
                "audio is resampled to this rate"),
      DS2_FIELD("features.window_ms", features.window_ms, double, "a number", "window length"),
      DS2_FIELD("features.hop_ms", features.hop_ms, double, "a number", "frame shift"),
      DS2_FIELD("features.window", features.window, std::string, "a string", "hamming | hann"),
      DS2_FIELD("features.type", features.type, std::string, "a string",
                "linear (log power spectrogram) | mel (log-mel) | mfcc (cepstra of the log-mel)"),
      DS2_FIELD("features.n_mels", features.n_mels, int, "an integer",
                "mel bands (type: mel or mfcc)"),
      DS2_FIELD("features.n_ceps", features.n_ceps, int, "an integer",
                "cepstral coefficients kept, c0 first (type: mfcc)"),
      DS2_FIELD("features.remove_dc", features.remove_dc, bool, "true or false",
                "subtract each frame's mean before windowing"),
      DS2_FIELD("features.preemphasis", features.preemphasis, double, "a number",
                "per-frame pre-emphasis coefficient (0 = off, 0.97 common)"),
      DS2_FIELD("features.normalize", features.normalize, std::string, "a string",
                "utterance | global | none"),
      DS2_FIELD("augment.speed_min", augment.speed_min, double, "a number",
                "speed perturbation: smallest factor (1 = off)"),
      DS2_FIELD("augment.speed_max", augment.speed_max, double, "a number",
                "speed perturbation: largest factor"),
      DS2_FIELD("augment.gain_db", augment.gain_db, double, "a number", "random gain +- dB"),
      DS2_FIELD("augment.noise_prob", augment.noise_prob, double, "a number",
                "probability of adding white noise"),
      DS2_FIELD("augment.noise_snr_min_db", augment.noise_snr_min_db, double, "a number",
                "lowest signal-to-noise ratio"),
      DS2_FIELD("augment.noise_snr_max_db", augment.noise_snr_max_db, double, "a number",
                "highest signal-to-noise ratio"),
      DS2_FIELD("augment.noise_manifest", augment.noise_manifest, std::string, "a path",
                "JSON-lines list of noise recordings to mix in (empty = white noise)"),
      DS2_FIELD("augment.freq_warp", augment.freq_warp, double, "a number",
                "frequency-axis warp (VTLP-like): factor in [1 - w, 1 + w] (0 = off)"),
      DS2_FIELD("augment.freq_masks", augment.freq_masks, int, "an integer",
                "SpecAugment frequency masks"),
      DS2_FIELD("augment.freq_mask_width", augment.freq_mask_width, int, "an integer",
                "largest frequency mask, in bins"),
      DS2_FIELD("augment.time_masks", augment.time_masks, int, "an integer",
                "SpecAugment time masks"),
      DS2_FIELD("augment.time_mask_width", augment.time_mask_width, int, "an integer",
                "largest time mask, in frames"),
      Field{"model.conv", "conv front-end: list of {channels, kernel: [t, f], stride: [t, f]}",
            [](Config& c, const YAML::Node& n) { c.model.conv = conv_from_yaml(n); },
            [](const Config& c) { return conv_to_yaml(c.model.conv); }},
      DS2_FIELD("model.rnn_layers", model.rnn_layers, int, "an integer", "recurrent layers"),
      DS2_FIELD("model.rnn_hidden", model.rnn_hidden, int, "an integer", "recurrent width"),
      DS2_FIELD("model.rnn_type", model.rnn_type, std::string, "a string", "rnn (ReLU) | gru"),
      DS2_FIELD("model.bidirectional", model.bidirectional, bool, "true or false",
                "bidirectional recurrent layers (directions summed)"),
      DS2_FIELD("model.rnn_residual", model.rnn_residual, bool, "true or false",
                "residual connections around recurrent layers whose input and output widths match"),
      DS2_FIELD("model.rnn_batch_norm", model.rnn_batch_norm, bool, "true or false",
                "sequence-wise batch norm on the recurrent input projection"),
      DS2_FIELD("model.relu_clip", model.relu_clip, float, "a number", "clipped ReLU ceiling"),
      DS2_FIELD("model.batch_norm_momentum", model.batch_norm_momentum, float, "a number",
                "update rate of batch-norm running statistics"),
      DS2_FIELD("model.batch_norm_statistics", model.batch_norm_statistics, std::string, "a string",
                "batch (the minibatch's; running averages at inference) | utterance (each "
                "utterance's own, in training and inference; no running statistics)"),
      DS2_FIELD("model.dropout", model.dropout, float, "a number",
                "dropout after each recurrent layer (0 = none)"),
      DS2_FIELD("model.lookahead", model.lookahead, int, "an integer",
                "future frames of a lookahead (row) convolution after the last recurrent layer "
                "(0 = none)"),
      DS2_FIELD("optim.name", optim.name, std::string, "a string", "adam | sgd (Nesterov)"),
      DS2_FIELD("optim.lr", optim.lr, double, "a number", "peak learning rate"),
      DS2_FIELD("optim.momentum", optim.momentum, double, "a number", "sgd momentum"),
      DS2_FIELD("optim.beta1", optim.beta1, double, "a number", "adam beta1"),
      DS2_FIELD("optim.beta2", optim.beta2, double, "a number", "adam beta2"),
      DS2_FIELD("optim.eps", optim.eps, double, "a number", "adam epsilon"),
      DS2_FIELD("optim.weight_decay", optim.weight_decay, double, "a number",
                "decoupled weight decay (AdamW-style for adam, L2 for sgd)"),
      DS2_FIELD("optim.grad_clip", optim.grad_clip, double, "a number",
                "global gradient L2-norm ceiling (0 = off)"),
      DS2_FIELD("optim.warmup_steps", optim.warmup_steps, int, "an integer",
                "linear learning-rate warm-up"),
      DS2_FIELD("optim.schedule", optim.schedule, std::string, "a string",
                "constant | cosine | exponential"),
      DS2_FIELD("optim.final_lr_ratio", optim.final_lr_ratio, double, "a number",
                "cosine: final lr as a fraction of the peak"),
      DS2_FIELD("optim.decay_per_epoch", optim.decay_per_epoch, double, "a number",
                "exponential: lr factor per epoch"),
      DS2_FIELD("train.epochs", train.epochs, int, "an integer", "passes over the training set"),
      DS2_FIELD("train.batch_size", train.batch_size, int, "an integer", "utterances per step"),
      DS2_FIELD("train.max_steps", train.max_steps, int, "an integer",
                "stop after this many steps (0 = no limit)"),
      DS2_FIELD("train.sortagrad", train.sortagrad, bool, "true or false",
                "first epoch in order of increasing duration"),
      DS2_FIELD("train.log_every", train.log_every, int, "an integer", "steps between log lines"),
      DS2_FIELD("train.eval_every", train.eval_every, int, "an integer",
                "steps between dev evaluations (0 = each epoch)"),
      DS2_FIELD("train.keep_checkpoints", train.keep_checkpoints, int, "an integer",
                "step checkpoints kept besides best and last"),
      DS2_FIELD("train.ema_decay", train.ema_decay, double, "a number",
                "weight moving average used for evaluation and checkpoints (0 = off)"),
      DS2_FIELD("train.init_from", train.init_from, std::string, "a path",
                "checkpoint to start from (fine-tuning: same model, features and alphabet; "
                "fresh optimizer and schedule)"),
      DS2_FIELD("train.max_consecutive_skips", train.max_consecutive_skips, int, "an integer",
                "non-finite steps in a row that stop the run"),
      DS2_FIELD(
          "train.loss_scaling", train.loss_scaling, std::string, "a string",
          "none | dynamic: loss gradient times a scale that halves on overflow (step skipped)"),
      Field{"train.loss_scale_init", "initial loss scale: a power of two from 1 to 2^127",
            [](Config& c, const YAML::Node& n) {
              c.train.loss_scale_init = scalar_as<double>(n, "a number");
            },
            // 2^120 printed with 15 digits would not load back as a power of two.
            [](const Config& c) { return exact_node(c.train.loss_scale_init); }},
      DS2_FIELD("train.loss_scale_growth_interval", train.loss_scale_growth_interval, int,
                "an integer",
                "clean steps in a row after which the loss scale doubles (up to 2^24)"),
      DS2_FIELD("train.precision", train.precision, std::string, "a string",
                "fp32 | bf16: bf16 GEMM operands and persistent RNN weights, fp32 accumulation "
                "and master weights (CUDA only)"),
      DS2_FIELD("train.rnn_wavefront", train.rnn_wavefront, bool, "true or false",
                "CUDA: consecutive unidirectional ReLU layers without batch norm or dropout run "
                "as a wavefront where possible (bf16, batch <= 8); false: layer after layer"),
      DS2_FIELD("train.persistent_rnn", train.persistent_rnn, bool, "true or false",
                "CUDA: recurrences (ReLU and GRU) run as persistent kernels where they fit the "
                "GPU; false: always the GEMM recurrence (one cuBLAS GEMM per step)"),
      DS2_FIELD("decode.beam_width", decode.beam_width, int, "an integer",
                "beam search width for eval/transcribe (0 = greedy without an LM, 32 with one)"),
      DS2_FIELD("decode.lm_path", decode.lm_path, std::string, "a path",
                "ARPA word n-gram LM fused into the beam search (empty = none)"),
      DS2_FIELD("decode.lm_weight", decode.lm_weight, double, "a number",
                "alpha: weight of the LM's natural-log probability per word"),
      DS2_FIELD("decode.word_score", decode.word_score, double, "a number",
                "beta: bonus per decoded word (with an LM)"),
      DS2_FIELD("decode.top_k", decode.top_k, int, "an integer",
                "labels tried per frame, most probable first (0 = all)"),
      DS2_FIELD("decode.prune", decode.prune, double, "a number",
                "labels with natural-log probability below this are skipped in a frame"),
      DS2_FIELD("decode.unk_log10_prob", decode.unk_log10_prob, double, "a number",
                "log10 LM probability of words outside the LM's vocabulary (0 = its <unk>)"),
      DS2_FIELD("dist.timeout_s", dist.timeout_s, double, "a number",
                "seconds a collective may wait on other ranks before the job is aborted"),
      DS2_FIELD("dist.bucket_mb", dist.bucket_mb, double, "a number",
                "gradient allreduce bucket size in MiB (buckets overlap backward)"),
      DS2_FIELD("dist.reduce_dtype", dist.reduce_dtype, std::string, "a string",
                "fp32 | bf16: element type of the gradient allreduce"),
      DS2_FIELD(
          "dist.comm_ctas", dist.comm_ctas, int, "an integer",
          "most CTAs the GPU gradient allreduce may occupy beside backward (0 = NCCL's choice)"),
      DS2_FIELD("dist.check_every", dist.check_every, int, "an integer",
                "debug: every N steps check that all ranks hold identical weights (0 = off)"),
      DS2_FIELD("prune.density", prune.density, double, "a number",
                "final fraction of each recurrent matrix (RNN .U) kept by pruning (1 = off)"),
      DS2_FIELD("prune.start_step", prune.start_step, int64_t, "an integer",
                "step where gradual magnitude pruning starts (density 1)"),
      DS2_FIELD("prune.end_step", prune.end_step, int64_t, "an integer",
                "step where prune.density is reached (> prune.start_step when pruning)"),
      DS2_FIELD("prune.every", prune.every, int64_t, "an integer",
                "steps between mask updates from prune.start_step to prune.end_step"),
  };
  return fields;
}

#undef DS2_FIELD

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string> all_paths() {
  std::vector<std::string> paths;
  for (const Field& f : schema()) {
    paths.push_back(f.key);
    const std::string section = f.key.substr(0, f.key.find('.'));
    if (std::find(paths.begin(), paths.end(), section) == paths.end()) paths.push_back(section);
  }
  return paths;
}

std::string nearest_key(const std::string& key) {
  // A truncated key ("optim.warmup") most likely means the valid key it begins.
  std::string best;
  for (const std::string& p : all_paths())
    if (p.rfind(key, 0) == 0 && (best.empty() || p.size() < best.size())) best = p;
  if (!best.empty()) return best;
  size_t best_d = std::string::npos;
  for (const std::string& p : all_paths()) {
    size_t d = edit_distance(key, p);
    if (d < best_d) best_d = d, best = p;
  }
  return best;
}

const Field* find_field(const std::string& key) {
  for (const Field& f : schema())
    if (f.key == key) return &f;
  return nullptr;
}

bool is_section(const std::string& key) {
  for (const Field& f : schema())
    if (f.key.rfind(key + ".", 0) == 0) return true;
  return false;
}

std::string location(const std::string& source, const YAML::Node& node) {
  std::ostringstream out;
  out << source;
  if (node.Mark().line >= 0) out << ":" << node.Mark().line + 1;
  return out.str();
}

void apply_value(Config& cfg, const std::string& key, const YAML::Node& value,
                 const std::string& where) {
  const Field* field = find_field(key);
  if (!field) {
    if (is_section(key)) {
      DS2_FAIL(where << ": '" << key << "' is a section; set one of its keys, e.g. '"
                     << nearest_key(key + ".") << "'");
    }
    DS2_FAIL(where << ": unknown key '" << printable(key) << "' (did you mean '" << nearest_key(key)
                   << "'?)");
  }
  try {
    field->set(cfg, value);
  } catch (const Error& e) {
    DS2_FAIL(where << ": key '" << key << "': " << e.what());
  }
}

void apply_map(Config& cfg, const YAML::Node& map, const std::string& prefix,
               const std::string& source) {
  DuplicateKeyCheck seen;
  for (const auto& kv : map) {
    std::string name;
    try {
      name = key_name(kv.first);
    } catch (const Error& e) {
      DS2_FAIL(location(source, kv.first)
               << ": " << (prefix.empty() ? "" : "in '" + prefix + "': ") << e.what());
    }
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    try {
      seen.add(name, key, line_of(kv.first));
    } catch (const Error& e) {
      DS2_FAIL(location(source, kv.first) << ": " << e.what());
    }
    if (!find_field(key) && is_section(key)) {
      DS2_CHECK(kv.second.IsMap() || kv.second.IsNull(),
                location(source, kv.second) << ": key '" << key << "' must be a section (a map)");
      if (kv.second.IsMap()) apply_map(cfg, kv.second, key, source);
      continue;
    }
    apply_value(cfg, key, kv.second, location(source, kv.first));
  }
}

void require_one_of(const std::string& key, const std::string& value,
                    std::initializer_list<std::string> allowed) {
  for (const std::string& a : allowed)
    if (value == a) return;
  std::ostringstream list;
  for (const std::string& a : allowed) list << (list.tellp() ? ", " : "") << a;
  DS2_FAIL("key '" << key << "': '" << printable(value) << "' is not one of: " << list.str());
}

void validate(const Config& c) {
  auto positive = [](const char* key, double v) {
    DS2_CHECK(v > 0, "key '" << key << "' must be positive, got " << v);
  };
  require_one_of("run.device", c.run.device, {"auto", "cpu", "cuda"});
  require_one_of("run.resume", c.run.resume, {"auto", "required", "never"});
  require_one_of("data.digits", c.data.digits, {"spell", "keep"});
  require_one_of("features.window", c.features.window, {"hamming", "hann"});
  require_one_of("features.type", c.features.type, {"linear", "mel", "mfcc"});
  require_one_of("features.normalize", c.features.normalize, {"utterance", "global", "none"});
  require_one_of("model.rnn_type", c.model.rnn_type, {"rnn", "gru"});
  require_one_of("model.batch_norm_statistics", c.model.batch_norm_statistics,
                 {"batch", "utterance"});
  require_one_of("optim.name", c.optim.name, {"adam", "sgd"});
  require_one_of("optim.schedule", c.optim.schedule, {"constant", "cosine", "exponential"});
  positive("features.sample_rate", c.features.sample_rate);
  positive("features.window_ms", c.features.window_ms);
  positive("features.hop_ms", c.features.hop_ms);
  positive("features.n_mels", c.features.n_mels);
  positive("features.n_ceps", c.features.n_ceps);
  DS2_CHECK(c.features.type != "mfcc" || c.features.n_ceps <= c.features.n_mels,
            "key 'features.n_ceps' ("
                << c.features.n_ceps << ") must not exceed 'features.n_mels' (" << c.features.n_mels
                << ")");
  // The warp moves energy between neighbouring bins; cepstra are not bins.
  DS2_CHECK(c.features.type != "mfcc" || c.augment.freq_warp == 0,
            "key 'augment.freq_warp' warps spectral bins: it needs features.type linear or mel, "
            "not mfcc");
  positive("model.rnn_hidden", c.model.rnn_hidden);
  positive("model.relu_clip", c.model.relu_clip);
  positive("optim.lr", c.optim.lr);
  positive("train.batch_size", c.train.batch_size);
  positive("train.log_every", c.train.log_every);
  DS2_CHECK(
      c.data.loader_threads >= 0,
      "key 'data.loader_threads' must be >= 0 (0: one per core), got " << c.data.loader_threads);
  positive("data.prefetch_batches", c.data.prefetch_batches);
  positive("data.max_duration_s", c.data.max_duration_s);
  DS2_CHECK(c.model.rnn_layers >= 1, "key 'model.rnn_layers' must be at least 1");
  DS2_CHECK(c.train.epochs >= 1, "key 'train.epochs' must be at least 1");
  DS2_CHECK(c.augment.speed_min > 0 && c.augment.speed_min <= c.augment.speed_max,
            "keys 'augment.speed_min'/'augment.speed_max' need 0 < min <= max");
  DS2_CHECK(c.augment.noise_prob >= 0 && c.augment.noise_prob <= 1,
            "key 'augment.noise_prob' must be in [0, 1]");
  DS2_CHECK(c.model.dropout >= 0 && c.model.dropout < 1, "key 'model.dropout' must be in [0, 1)");
  DS2_CHECK(c.model.lookahead >= 0 && c.model.lookahead <= 100,
            "key 'model.lookahead' must be from 0 to 100 frames, got " << c.model.lookahead);
  DS2_CHECK(c.train.ema_decay >= 0 && c.train.ema_decay < 1,
            "key 'train.ema_decay' must be in [0, 1)");
  DS2_CHECK(c.optim.grad_clip >= 0, "key 'optim.grad_clip' must be >= 0");
  require_one_of("train.loss_scaling", c.train.loss_scaling, {"none", "dynamic"});
  require_one_of("train.precision", c.train.precision, {"fp32", "bf16"});
  {
    // The engines take the scale as a float, and only powers of two scale gradients exactly.
    int exponent = 0;
    const double s = c.train.loss_scale_init;
    DS2_CHECK(std::isfinite(s) && s >= 1 && std::frexp(s, &exponent) == 0.5 && exponent <= 128,
              "key 'train.loss_scale_init' must be a power of two from 1 to 2^127, got " << s);
  }
  DS2_CHECK(c.train.loss_scale_growth_interval >= 1,
            "key 'train.loss_scale_growth_interval' must be at least 1, got "
                << c.train.loss_scale_growth_interval);
  DS2_CHECK(c.optim.warmup_steps >= 0 && c.train.max_steps >= 0,
            "keys 'optim.warmup_steps' and 'train.max_steps' must be >= 0");
  DS2_CHECK(c.decode.beam_width >= 0, "key 'decode.beam_width' must be >= 0");
  DS2_CHECK(c.decode.top_k >= 0, "key 'decode.top_k' must be >= 0");
  DS2_CHECK(c.decode.unk_log10_prob <= 0, "key 'decode.unk_log10_prob' must be <= 0");
  DS2_CHECK(std::isfinite(c.decode.lm_weight) && std::isfinite(c.decode.word_score),
            "keys 'decode.lm_weight' and 'decode.word_score' must be finite numbers");
  DS2_CHECK(!std::isnan(c.decode.prune), "key 'decode.prune' must be a number");
  require_one_of("dist.reduce_dtype", c.dist.reduce_dtype, {"fp32", "bf16"});
  positive("dist.timeout_s", c.dist.timeout_s);
  positive("dist.bucket_mb", c.dist.bucket_mb);
  DS2_CHECK(c.dist.check_every >= 0, "key 'dist.check_every' must be >= 0");
  DS2_CHECK(c.dist.comm_ctas >= 0, "key 'dist.comm_ctas' must be >= 0");
  DS2_CHECK(c.prune.density > 0 && c.prune.density <= 1,
            "key 'prune.density' must be in (0, 1], got " << c.prune.density);
  DS2_CHECK(c.prune.start_step >= 0,
            "key 'prune.start_step' must be >= 0, got " << c.prune.start_step);
  DS2_CHECK(c.prune.every >= 1, "key 'prune.every' must be at least 1, got " << c.prune.every);
  DS2_CHECK(c.prune.density == 1 || c.prune.end_step > c.prune.start_step,
            "key 'prune.end_step' must be > prune.start_step ("
                << c.prune.start_step << ") when pruning, got " << c.prune.end_step);
}

std::string emit_resolved(const Config& cfg) {
  YAML::Node root;
  for (const Field& f : schema()) {
    const std::string section = f.key.substr(0, f.key.find('.'));
    root[section][f.key.substr(section.size() + 1)] = f.get(cfg);
  }
  YAML::Emitter out;
  out.SetDoublePrecision(15);
  out.SetFloatPrecision(7);
  out << root;
  return std::string(out.c_str()) + "\n";
}

}  // namespace

static Config parse_config_in(const std::string& yaml_text,
                              const std::vector<std::string>& overrides, const std::string& source,
                              const std::filesystem::path& base_dir) {
  Config cfg;
  cfg.source = source;
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    DS2_FAIL(source << (e.mark.line >= 0 ? ":" + std::to_string(e.mark.line + 1) : "")
                    << ": invalid YAML: " << yaml_error(e));
  }
  if (root.IsDefined() && !root.IsNull()) {
    DS2_CHECK(root.IsMap(), source << ": the config must be a YAML map of sections");
    apply_map(cfg, root, "", source);
  }
  // Data paths written in a config file are relative to that file, so a recipe works from any
  // folder; paths given as overrides are relative to the current folder, like any argument.
  if (!base_dir.empty()) {
    for (std::string* p :
         {&cfg.data.train_manifest, &cfg.data.dev_manifest, &cfg.data.alphabet, &cfg.decode.lm_path,
          &cfg.augment.noise_manifest, &cfg.train.init_from}) {
      if (!p->empty() && std::filesystem::path(*p).is_relative())
        *p = (base_dir / *p).lexically_normal().string();
    }
  }
  for (const std::string& ov : overrides) {
    const std::string shown = "override '" + printable(ov) + "'";
    const size_t eq = ov.find('=');
    DS2_CHECK(eq != std::string::npos && eq > 0, shown << ": expected key.path=value");
    const std::string key = ov.substr(0, eq);
    YAML::Node value;
    try {
      value = YAML::Load(ov.substr(eq + 1));
    } catch (const YAML::Exception& e) {
      DS2_FAIL(shown << ": invalid value: " << yaml_error(e));
    }
    if (ov.size() == eq + 1) value = YAML::Node(std::string());
    apply_value(cfg, key, value, shown);
  }
  try {
    validate(cfg);
  } catch (const Error& e) {
    DS2_FAIL(source << ": " << e.what());
  }
  cfg.resolved_yaml = emit_resolved(cfg);
  return cfg;
}

std::vector<std::pair<std::string, std::string>> config_values(const Config& cfg) {
  std::vector<std::pair<std::string, std::string>> values;
  for (const Field& f : schema()) {
    YAML::Emitter out;
    out.SetDoublePrecision(15);
    out.SetFloatPrecision(7);
    out << YAML::Flow << f.get(cfg);
    values.emplace_back(f.key, out.c_str());
  }
  return values;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  DS2_CHECK(in, path << ": cannot open config file");
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::path base = std::filesystem::path(path).parent_path();
  if (base.empty()) base = ".";
  return parse_config_in(text.str(), overrides, path, base);
}

Config parse_config(const std::string& yaml_text, const std::vector<std::string>& overrides,
                    const std::string& source) {
  return parse_config_in(yaml_text, overrides, source, {});
}

std::string describe_config_keys() {
  Config defaults;
  std::ostringstream out;
  for (const Field& f : schema()) {
    YAML::Emitter e;
    e.SetDoublePrecision(15);
    e.SetFloatPrecision(7);
    e << YAML::Flow << f.get(defaults);
    out << f.key << " = " << e.c_str() << "    # " << f.doc << "\n";
  }
  return out.str();
}

}  // namespace ds2
