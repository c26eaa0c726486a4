#include "train/evaluate.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "audio/audio_io.h"
#include "core/error.h"
#include "ctc/greedy_decoder.h"
#include "data/loader.h"

namespace ds2 {

std::vector<std::string> decode_dataset(AcousticModel& am, const Dataset& dataset, int batch_size,
                                        int threads, std::vector<std::string>* failures) {
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
  std::vector<std::string> texts(dataset.examples.size());
  Loader loader(dataset, *am.featurizer, threads, 4);
  loader.start_epoch(std::move(batches), 0, 0, /*augment=*/false);
  while (const Batch* batch = loader.next()) {
    if (failures) failures->insert(failures->end(), batch->failures.begin(), batch->failures.end());
    if (batch->examples.empty()) continue;
    am.model->forward(batch->features, /*training=*/false);
    const auto hyps = greedy_decode(am.model->logits());
    for (size_t i = 0; i < batch->examples.size(); ++i)
      texts[batch->examples[i]] = am.alphabet.decode(hyps[i]);
  }
  return texts;
}

EvalResult evaluate(AcousticModel& am, const Dataset& dataset, int batch_size, int threads) {
  const auto start = std::chrono::steady_clock::now();
  EvalResult result;
  std::vector<std::string> texts =
      decode_dataset(am, dataset, batch_size, threads, &result.failures);
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
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::vector<std::string> transcribe_files(AcousticModel& am, const std::vector<std::string>& paths,
                                          int batch_size, int threads) {
  Dataset ds;
  ds.manifest = "<command line>";
  for (size_t i = 0; i < paths.size(); ++i) {
    Example ex;
    ex.utterance.id = paths[i];
    ex.utterance.audio_path = paths[i];
    ex.utterance.manifest = "<command line>";
    ex.utterance.line = static_cast<int>(i + 1);
    ex.duration_s = probe_audio(paths[i]).duration_s;  // throws "PATH: reason"
    ds.examples.push_back(std::move(ex));
  }
  std::vector<std::string> failures;
  std::vector<std::string> texts = decode_dataset(am, ds, batch_size, threads, &failures);
  if (!failures.empty()) throw Error(failures.front());
  return texts;
}

}  // namespace ds2
