#include "train/evaluate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>

#include "audio/audio_io.h"
#include "core/error.h"
#include "ctc/ctc_alignment.h"
#include "data/loader.h"
#include "train/transcribe.h"

namespace ds2 {
namespace {

// Where utterance `utterance` of a batch's logits {T, B, K} lies.
struct LogitsView {
  const float* data;
  int max_frames, batch, classes, utterance, length;
};

// Runs the model over `dataset` in batches of similar duration and calls `fn(example, view)`
// for every utterance, in batch order; the view is valid during the call only.
void for_each_logits(AcousticModel& am, const Dataset& dataset, int batch_size, int threads,
                     std::vector<std::string>* failures,
                     const std::function<void(int, const LogitsView&)>& fn) {
  std::vector<int> order(dataset.examples.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return dataset.examples[a].duration_s < dataset.examples[b].duration_s;
  });
  std::vector<std::vector<int>> batches;
  for (size_t i = 0; i < order.size(); i += batch_size)
    batches.emplace_back(
        order.begin() + i,
        order.begin() + std::min(order.size(), i + static_cast<size_t>(batch_size)));
  Loader loader(dataset, *am.featurizer, threads, 4);
  loader.start_epoch(std::move(batches), 0, 0, /*augment=*/false);
  while (const Batch* batch = loader.next()) {
    if (failures) failures->insert(failures->end(), batch->failures.begin(), batch->failures.end());
    if (batch->examples.empty()) continue;
    const Sequences& logits = am.forward_inference(batch->features);
    const int T = static_cast<int>(logits.data.dim(0));
    const int B = static_cast<int>(logits.data.dim(1));
    const int K = static_cast<int>(logits.data.dim(2));
    for (size_t i = 0; i < batch->examples.size(); ++i)
      fn(batch->examples[i],
         LogitsView{logits.data.data(), T, B, K, static_cast<int>(i), logits.lengths[i]});
  }
}

// One utterance's logits copied out of its batch, frame-major.
UtteranceLogits copy_logits(const LogitsView& v) {
  UtteranceLogits u;
  u.frames = v.length;
  u.classes = v.classes;
  u.data.resize(static_cast<size_t>(v.length) * v.classes);
  for (int t = 0; t < v.length; ++t) {
    const float* row = v.data + (static_cast<int64_t>(t) * v.batch + v.utterance) * v.classes;
    std::copy(row, row + v.classes, u.data.begin() + static_cast<int64_t>(t) * v.classes);
  }
  return u;
}

// Decodes utterances on worker threads; each text goes to its own slot, so the output does not
// depend on the number of threads or their timing. At most kMaxQueued utterances wait.
class DecodeWorkers {
 public:
  DecodeWorkers(const TextDecoder& decoder, int threads, std::vector<std::string>* texts)
      : decoder_(decoder), texts_(texts) {
    for (int i = 0; i < std::max(1, threads); ++i) workers_.emplace_back([this] { work(); });
  }
  ~DecodeWorkers() { close(); }
  DecodeWorkers(const DecodeWorkers&) = delete;
  DecodeWorkers& operator=(const DecodeWorkers&) = delete;

  // Decodes `logits` (owned by the job) into texts[index].
  void add(int index, UtteranceLogits logits) { push(Job{index, nullptr, std::move(logits)}); }
  // Decodes `*logits`, which must outlive finish(), into texts[index].
  void add(int index, const UtteranceLogits* logits) { push(Job{index, logits, {}}); }

  // Waits for every utterance; rethrows the first decoding error.
  void finish() {
    close();
    if (error_) std::rethrow_exception(error_);
  }

 private:
  struct Job {
    int index;
    const UtteranceLogits* borrowed;
    UtteranceLogits owned;
  };
  static constexpr size_t kMaxQueued = 256;

  void push(Job job) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      space_.wait(lock, [&] { return queue_.size() < kMaxQueued; });
      queue_.push_back(std::move(job));
    }
    ready_.notify_one();
  }

  void work() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ready_.wait(lock, [&] { return closing_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      space_.notify_one();
      const UtteranceLogits& u = job.borrowed ? *job.borrowed : job.owned;
      try {
        (*texts_)[job.index] = decoder_.decode(u.data.data(), u.frames, 1, u.classes, 0, u.frames);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }

  void close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    ready_.notify_all();
    for (auto& t : workers_)
      if (t.joinable()) t.join();
  }

  const TextDecoder& decoder_;
  std::vector<std::string>* texts_;
  std::mutex mu_;
  std::condition_variable ready_, space_;
  std::deque<Job> queue_;
  bool closing_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> workers_;
};

}  // namespace

std::vector<std::string> decode_dataset(AcousticModel& am, const Dataset& dataset,
                                        const TextDecoder& decoder, int batch_size, int threads,
                                        std::vector<std::string>* failures) {
  std::vector<std::string> texts(dataset.examples.size());
  if (decoder.greedy()) {
    // Best-path decoding costs little next to the network: no worker threads.
    for_each_logits(
        am, dataset, batch_size, threads, failures, [&](int example, const LogitsView& v) {
          texts[example] =
              decoder.decode(v.data, v.max_frames, v.batch, v.classes, v.utterance, v.length);
        });
    return texts;
  }
  DecodeWorkers workers(decoder, threads, &texts);
  for_each_logits(am, dataset, batch_size, threads, failures,
                  [&](int example, const LogitsView& v) { workers.add(example, copy_logits(v)); });
  workers.finish();
  return texts;
}

std::vector<std::string> decode_dataset(AcousticModel& am, const Dataset& dataset, int batch_size,
                                        int threads, std::vector<std::string>* failures) {
  return decode_dataset(am, dataset, TextDecoder(am.alphabet), batch_size, threads, failures);
}

std::vector<UtteranceLogits> dataset_logits(AcousticModel& am, const Dataset& dataset,
                                            int batch_size, int threads,
                                            std::vector<std::string>* failures) {
  std::vector<UtteranceLogits> out(dataset.examples.size());
  for_each_logits(am, dataset, batch_size, threads, failures,
                  [&](int example, const LogitsView& v) { out[example] = copy_logits(v); });
  return out;
}

std::vector<std::string> decode_logits(const std::vector<UtteranceLogits>& logits,
                                       const TextDecoder& decoder, int threads) {
  std::vector<std::string> texts(logits.size());
  DecodeWorkers workers(decoder, threads, &texts);
  for (size_t i = 0; i < logits.size(); ++i) workers.add(static_cast<int>(i), &logits[i]);
  workers.finish();
  return texts;
}

EvalResult score_texts(const AcousticModel& am, const Dataset& dataset,
                       const std::vector<std::string>& texts) {
  DS2_CHECK(
      texts.size() == dataset.examples.size(),
      "score_texts: " << texts.size() << " texts for " << dataset.examples.size() << " utterances");
  EvalResult result;
  TextNormalization norm;
  norm.digits = parse_digits_policy(am.config.data.digits);
  for (size_t i = 0; i < dataset.examples.size(); ++i) {
    const Example& ex = dataset.examples[i];
    UtteranceResult u;
    u.id = ex.utterance.id;
    u.reference = normalize_text(ex.utterance.text, norm);
    u.hypothesis = texts[i];
    u.words = word_errors(u.reference, u.hypothesis);
    result.words.add(u.words);
    result.chars.add(char_errors(u.reference, u.hypothesis));
    result.audio_seconds += ex.duration_s;
    result.utterances.push_back(std::move(u));
  }
  return result;
}

EvalResult evaluate(AcousticModel& am, const Dataset& dataset, const TextDecoder& decoder,
                    int batch_size, int threads) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> failures;
  std::vector<std::string> texts =
      decode_dataset(am, dataset, decoder, batch_size, threads, &failures);
  EvalResult result = score_texts(am, dataset, texts);
  result.failures = std::move(failures);
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

namespace {

// How sure the model is of its best path through `u` (transcribe.h's utterance confidence).
double best_path_confidence(const UtteranceLogits& u, const Alphabet& alphabet) {
  if (u.frames == 0) return -1.0;  // a failed utterance: never preferred
  const std::vector<float> log_probs = log_softmax_frames(u.data.data(), u.frames, u.classes);
  const std::vector<int> path = best_path(u.data.data(), u.frames, u.classes);
  double confidence = 0;
  words_from_path(log_probs, u.classes, path, alphabet, 1.0, u.frames, &confidence);
  return confidence;
}

}  // namespace

EvalResult evaluate(AcousticModel& am, const Dataset& dataset, const TextDecoder& decoder,
                    const std::vector<double>& warps, int batch_size, int threads) {
  if (warps.empty()) return evaluate(am, dataset, decoder, batch_size, threads);
  for (double w : warps)
    DS2_CHECK(w > 0.5 && w < 2.0, "--warps: each frequency warp must be in (0.5, 2), got " << w);
  const auto start = std::chrono::steady_clock::now();
  const size_t n = dataset.examples.size();
  std::vector<UtteranceLogits> best(n);
  std::vector<double> best_confidence(n, -2.0), chosen(n, 1.0);
  std::vector<std::string> failures;
  const double restore = am.featurizer->frequency_warp();
  try {
    for (size_t w = 0; w < warps.size(); ++w) {
      am.featurizer->set_frequency_warp(warps[w]);
      std::vector<std::string> pass_failures;  // the same utterances fail in every pass
      std::vector<UtteranceLogits> logits =
          dataset_logits(am, dataset, batch_size, threads, &pass_failures);
      if (w == 0) failures = std::move(pass_failures);
      for (size_t i = 0; i < n; ++i) {
        const double c = best_path_confidence(logits[i], am.alphabet);
        const bool nearer_one = std::abs(warps[w] - 1.0) < std::abs(chosen[i] - 1.0);
        if (c > best_confidence[i] || (c == best_confidence[i] && nearer_one)) {
          best_confidence[i] = c;
          chosen[i] = warps[w];
          best[i] = std::move(logits[i]);
        }
      }
    }
  } catch (...) {
    am.featurizer->set_frequency_warp(restore);
    throw;
  }
  am.featurizer->set_frequency_warp(restore);
  EvalResult result = score_texts(am, dataset, decode_logits(best, decoder, threads));
  result.failures = std::move(failures);
  result.warps = std::move(chosen);
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

EvalResult evaluate(AcousticModel& am, const Dataset& dataset, int batch_size, int threads) {
  return evaluate(am, dataset, TextDecoder(am.alphabet), batch_size, threads);
}

std::vector<std::string> transcribe_files(AcousticModel& am, const std::vector<std::string>& paths,
                                          const TextDecoder& decoder, int batch_size, int threads) {
  Dataset ds;
  ds.manifest = kCommandLineManifest;
  for (Utterance& utt : command_line_utterances(paths)) {
    Example ex;
    ex.duration_s = probe_audio(utt.audio_path).duration_s;  // throws "PATH: reason"
    ex.utterance = std::move(utt);
    ds.examples.push_back(std::move(ex));
  }
  std::vector<std::string> failures;
  std::vector<std::string> texts = decode_dataset(am, ds, decoder, batch_size, threads, &failures);
  if (!failures.empty()) throw Error(failures.front());
  return texts;
}

std::vector<std::string> transcribe_files(AcousticModel& am, const std::vector<std::string>& paths,
                                          int batch_size, int threads) {
  return transcribe_files(am, paths, TextDecoder(am.alphabet), batch_size, threads);
}

}  // namespace ds2
