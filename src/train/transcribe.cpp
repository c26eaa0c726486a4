#include "train/transcribe.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>

#include "audio/audio_io.h"
#include "audio/normalize.h"
#include "core/error.h"
#include "ctc/ctc_alignment.h"
#include "ctc/error_rate.h"

namespace ds2 {
namespace {

// Calls fn(i) for i in [0, n) on up to `threads` threads; rethrows the first exception.
void parallel_for(int n, int threads, const std::function<void(int)>& fn) {
  const int workers = std::max(1, std::min(threads, n));
  if (workers <= 1) {
    for (int i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<int> next{0};
  std::exception_ptr error;
  std::mutex mu;
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w) {
    pool.emplace_back([&] {
      for (int i = next++; i < n; i = next++) {
        try {
          fn(i);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mu);
          if (!error) error = std::current_exception();
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

// Text with single spaces between words and none at the ends (a CTC path may emit a space at
// the start, at the end or twice in a row).
std::string tidy(const std::string& text) {
  std::string out;
  for (const std::string& word : split_words(text)) out += (out.empty() ? "" : " ") + word;
  return out;
}

int conv_time_stride(const ModelConfig& model) {
  int stride = 1;
  for (const auto& c : model.conv) stride *= c.stride_time;
  return stride;
}

}  // namespace

struct Transcriber::Recording {
  Transcript transcript;
  std::vector<float> samples;
  std::vector<Window> windows;
  // Feature statistics of the whole recording, for utterance normalization across windows.
  std::vector<float> mean, stddev;
};

Transcriber::Transcriber(AcousticModel& am, const TextDecoder& decoder,
                         const TranscribeOptions& options)
    : am_(am), decoder_(decoder), options_(options) {
  DS2_CHECK(options.batch_size >= 1, "transcribe: batch size must be >= 1");
  frame_samples_ = am.featurizer->hop_samples() * conv_time_stride(am.config.model);
  const double rate = am.featurizer->sample_rate();
  if (options.window_s > 0) {
    DS2_CHECK(options.overlap_s >= 0 && options.overlap_s < options.window_s,
              "transcribe: the window overlap (" << options.overlap_s
                                                 << " s) must be >= 0 and shorter than the window ("
                                                 << options.window_s << " s)");
    // Window length and step in whole output frames.
    const int64_t window_frames = static_cast<int64_t>(options.window_s * rate / frame_samples_);
    const int64_t overlap_frames =
        static_cast<int64_t>(std::lround(options.overlap_s * rate / frame_samples_));
    DS2_CHECK(window_frames > overlap_frames && window_frames >= 1,
              "transcribe: a window of " << options.window_s << " s with " << options.overlap_s
                                         << " s overlap leaves no output frames to step by");
    window_samples_ = window_frames * frame_samples_;
    step_samples_ = (window_frames - overlap_frames) * frame_samples_;
  } else {
    window_samples_ = step_samples_ = 0;
  }
}

double Transcriber::output_frame_seconds() const {
  return static_cast<double>(frame_samples_) / am_.featurizer->sample_rate();
}

std::vector<Transcriber::Window> Transcriber::plan(int recording, int64_t num_samples) const {
  std::vector<Window> windows;
  if (window_samples_ == 0 || num_samples <= window_samples_) {
    windows.push_back(Window{recording, 0, num_samples, 0, 0, {}});
    return windows;
  }
  for (int64_t start = 0;; start += step_samples_) {
    // The last window ends with the recording and is a whole window long (its overlap with the
    // one before is larger), so no window is too short to featurize.
    const bool last = start + window_samples_ >= num_samples;
    if (last) start = (num_samples - window_samples_) / frame_samples_ * frame_samples_;
    windows.push_back(Window{recording,
                             start,
                             last ? num_samples - start : window_samples_,
                             static_cast<int>(start / frame_samples_),
                             0,
                             {}});
    if (last) break;
  }
  return windows;
}

void Transcriber::recording_stats(Recording& rec) const {
  const Featurizer& fz = *am_.featurizer;
  if (rec.windows.size() <= 1 || am_.config.features.normalize != "utterance") return;
  // Each window's raw features, counting every feature frame of the recording once: window i
  // starts at frame first_sample / hop, and frames that an earlier window covered are skipped.
  const int hop = fz.hop_samples();
  std::vector<FeatureStats> parts(rec.windows.size());
  parallel_for(static_cast<int>(rec.windows.size()), options_.threads, [&](int i) {
    const Window& w = rec.windows[i];
    const std::vector<float> samples(rec.samples.begin() + w.first_sample,
                                     rec.samples.begin() + w.first_sample + w.num_samples);
    Tensor raw;
    fz.raw_features(samples, raw);
    int64_t skip = 0;
    if (i > 0) {
      const Window& before = rec.windows[i - 1];
      skip = std::max<int64_t>(0, before.first_sample / hop +
                                      fz.frames_for_samples(before.num_samples) -
                                      w.first_sample / hop);
    }
    const int64_t keep = std::max<int64_t>(0, raw.dim(0) - skip);
    if (keep == 0) return;
    Tensor rows({keep, raw.dim(1)});
    std::copy(raw.data() + skip * raw.dim(1), raw.data() + raw.numel(), rows.data());
    parts[i].accumulate(rows);
  });
  FeatureStats all;
  for (const FeatureStats& p : parts)
    if (p.count > 0) all.merge(p);
  rec.mean = all.mean();
  rec.stddev = all.stddev();
}

void Transcriber::compute(std::vector<Recording>& recordings, std::vector<Window*>& windows) {
  // Longest first, so windows of equal length share batches and padding stays small.
  std::stable_sort(windows.begin(), windows.end(), [](const Window* a, const Window* b) {
    return a->num_samples > b->num_samples;
  });
  const Featurizer& fz = *am_.featurizer;
  const int F = fz.num_features();
  std::vector<Tensor> features;
  Sequences batch;
  for (size_t begin = 0; begin < windows.size(); begin += options_.batch_size) {
    const int B = static_cast<int>(
        std::min(windows.size() - begin, static_cast<size_t>(options_.batch_size)));
    features.resize(B);
    parallel_for(B, options_.threads, [&](int i) {
      const Window& w = *windows[begin + i];
      const std::vector<float>& all = recordings[w.recording].samples;
      std::vector<float> samples(all.begin() + w.first_sample,
                                 all.begin() + w.first_sample + w.num_samples);
      const Recording& rec = recordings[w.recording];
      if (rec.mean.empty()) {
        fz.featurize_samples(samples, /*augment_rng=*/nullptr, features[i]);
      } else {
        fz.raw_features(samples, features[i]);
        apply_global_normalization(features[i], rec.mean, rec.stddev);
      }
    });
    int64_t max_frames = 0;
    for (const Tensor& f : features) max_frames = std::max(max_frames, f.dim(0));
    batch.data.resize({max_frames, B, F});
    batch.data.fill(0.0f);
    batch.lengths.assign(B, 0);
    for (int i = 0; i < B; ++i) {
      const int64_t frames = features[i].dim(0);
      batch.lengths[i] = static_cast<int>(frames);
      for (int64_t t = 0; t < frames; ++t)
        std::copy(features[i].data() + t * F, features[i].data() + (t + 1) * F,
                  batch.data.data() + (t * B + i) * F);
    }
    const Sequences& logits = am_.forward_inference(batch);
    const int K = static_cast<int>(logits.data.dim(2));
    for (int i = 0; i < B; ++i) {
      Window& w = *windows[begin + i];
      w.frames = logits.lengths[i];
      w.out.frames = w.frames;
      w.out.classes = K;
      w.out.data.resize(static_cast<size_t>(w.frames) * K);
      for (int t = 0; t < w.frames; ++t) {
        const float* row = logits.data.data() + (static_cast<int64_t>(t) * B + i) * K;
        std::copy(row, row + K, w.out.data.begin() + static_cast<int64_t>(t) * K);
      }
    }
  }
}

UtteranceLogits Transcriber::stitch(const std::vector<Window>& windows) const {
  UtteranceLogits out;
  if (windows.size() == 1) return windows[0].out;
  const Window& last = windows.back();
  out.frames = last.first_frame + last.frames;
  out.classes = last.out.classes;
  out.data.resize(static_cast<size_t>(out.frames) * out.classes);
  int begin = 0;  // first frame of the whole recording not written yet
  for (size_t i = 0; i < windows.size(); ++i) {
    const Window& w = windows[i];
    // The middle of the overlap [next.first_frame, w.first_frame + w.frames) with the next one.
    int end = out.frames;
    if (i + 1 < windows.size()) end = (windows[i + 1].first_frame + w.first_frame + w.frames) / 2;
    end = std::min(end, w.first_frame + w.frames);
    for (int t = begin; t < end; ++t) {
      const int local = t - w.first_frame;
      std::copy(w.out.data.begin() + static_cast<int64_t>(local) * out.classes,
                w.out.data.begin() + static_cast<int64_t>(local + 1) * out.classes,
                out.data.begin() + static_cast<int64_t>(t) * out.classes);
    }
    begin = std::max(begin, end);
  }
  DS2_CHECK(begin == out.frames,
            "transcribe: windows leave frames " << begin << ".." << out.frames << " uncovered");
  return out;
}

UtteranceLogits Transcriber::logits(const std::vector<float>& samples, int* windows) {
  std::vector<Recording> recs(1);
  recs[0].samples = samples;
  recs[0].windows = plan(0, static_cast<int64_t>(samples.size()));
  recording_stats(recs[0]);
  std::vector<Window*> todo;
  for (Window& w : recs[0].windows) todo.push_back(&w);
  compute(recs, todo);
  if (windows) *windows = static_cast<int>(recs[0].windows.size());
  return stitch(recs[0].windows);
}

void Transcriber::finish(Recording& rec) const {
  Transcript& tr = rec.transcript;
  const UtteranceLogits logits = stitch(rec.windows);
  rec.windows.clear();
  tr.text =
      tidy(decoder_.decode(logits.data.data(), logits.frames, 1, logits.classes, 0, logits.frames));
  if (!options_.word_timings) return;
  const std::vector<float> log_probs =
      log_softmax_frames(logits.data.data(), logits.frames, logits.classes);
  std::vector<int> path;
  if (decoder_.greedy()) {
    path = best_path(logits.data.data(), logits.frames, logits.classes);
  } else {
    std::string unknown;
    const std::vector<int> labels = am_.alphabet.encode(tr.text, &unknown);
    if (unknown.empty())
      path = forced_alignment(log_probs.data(), logits.frames, logits.classes, labels);
  }
  tr.words = words_from_path(log_probs, logits.classes, path, am_.alphabet, output_frame_seconds(),
                             tr.duration_s, &tr.confidence);
}

void Transcriber::run(const std::vector<std::string>& paths,
                      const std::function<void(const Transcript&)>& emit) {
  const int rate = am_.featurizer->sample_rate();
  const double window_s = window_samples_ > 0 ? static_cast<double>(window_samples_) / rate : 0.0;
  size_t next = 0;
  while (next < paths.size()) {
    // A group: recordings in order until they make at least one batch of windows.
    std::vector<Recording> group;
    int64_t planned = 0;
    while (next < paths.size() && planned < options_.batch_size) {
      Recording rec;
      rec.transcript.path = paths[next++];
      try {
        const AudioInfo info = probe_audio(rec.transcript.path);
        planned += window_s > 0 ? std::max<int64_t>(1, std::ceil(info.duration_s / window_s)) : 1;
      } catch (const Error& e) {
        rec.transcript.error = e.what();
        ++planned;
      }
      group.push_back(std::move(rec));
    }
    parallel_for(static_cast<int>(group.size()), options_.threads, [&](int i) {
      Recording& rec = group[i];
      if (!rec.transcript.error.empty()) return;
      try {
        rec.samples = am_.featurizer->load_samples(rec.transcript.path);
        rec.transcript.duration_s = static_cast<double>(rec.samples.size()) / rate;
        DS2_CHECK(am_.featurizer->frames_for_duration(rec.transcript.duration_s) > 0,
                  rec.transcript.path << ": too short for one " << am_.config.features.window_ms
                                      << " ms analysis window");
        rec.windows = plan(i, static_cast<int64_t>(rec.samples.size()));
        rec.transcript.windows = static_cast<int>(rec.windows.size());
      } catch (const Error& e) {
        rec.transcript.error = e.what();
        rec.samples.clear();
      }
    });
    std::vector<Window*> windows;
    for (Recording& rec : group) {
      recording_stats(rec);
      for (Window& w : rec.windows) windows.push_back(&w);
    }
    compute(group, windows);
    parallel_for(static_cast<int>(group.size()), options_.threads, [&](int i) {
      Recording& rec = group[i];
      rec.samples = {};
      if (!rec.transcript.error.empty()) return;
      try {
        finish(rec);
      } catch (const Error& e) {
        rec.transcript.error = rec.transcript.path + ": " + e.what();
      }
    });
    for (const Recording& rec : group) emit(rec.transcript);
  }
}

std::vector<WordTiming> words_from_path(const std::vector<float>& log_probs, int classes,
                                        const std::vector<int>& path, const Alphabet& alphabet,
                                        double frame_seconds, double duration_s,
                                        double* utterance_confidence) {
  int space = -1;
  for (int c = 1; c <= alphabet.size(); ++c)
    if (alphabet.symbol(c) == " ") space = c;
  auto posterior = [&](int t) {
    return std::exp(static_cast<double>(log_probs[static_cast<size_t>(t) * classes + path[t]]));
  };
  std::vector<WordTiming> words;
  double frames_sum = 0;  // posterior sum over the current word's frames
  int frames = 0;
  bool open = false;
  auto close = [&] {
    if (!open) return;
    words.back().confidence = frames_sum / frames;
    open = false;
    frames_sum = 0;
    frames = 0;
  };
  for (const LabelSpan& span : label_spans(path)) {
    if (span.label == space) {
      close();
      continue;
    }
    if (!open) {
      words.push_back({});
      words.back().start_s = std::min(duration_s, span.first * frame_seconds);
      open = true;
    }
    WordTiming& w = words.back();
    w.word += alphabet.symbol(span.label);
    w.end_s = std::min(duration_s, (span.last + 1) * frame_seconds);
    for (int t = span.first; t <= span.last; ++t) frames_sum += posterior(t);
    frames += span.last - span.first + 1;
  }
  close();
  if (utterance_confidence) {
    double sum = 0;
    if (!words.empty()) {
      for (const WordTiming& w : words) sum += w.confidence;
      *utterance_confidence = sum / static_cast<double>(words.size());
    } else {
      for (size_t t = 0; t < path.size(); ++t) sum += posterior(static_cast<int>(t));
      *utterance_confidence = path.empty() ? 0.0 : sum / static_cast<double>(path.size());
    }
  }
  return words;
}

}  // namespace ds2
