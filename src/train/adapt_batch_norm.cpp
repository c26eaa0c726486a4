#include "train/adapt_batch_norm.h"

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "data/loader.h"
#include "nn/batch_norm.h"

namespace ds2 {

bool has_running_statistics(const AcousticModel& am) {
  return parse_norm_statistics(am.config.model.batch_norm_statistics) == NormStatistics::kBatch;
}

void adapt_batch_norm(AcousticModel& am, const Dataset& dataset, int passes, int batch_size,
                      int threads) {
  DS2_CHECK(passes >= 0 && batch_size > 0 && threads > 0,
            "batch-norm adaptation: passes " << passes << ", batch size " << batch_size
                                             << " and threads " << threads
                                             << " must be >= 0, > 0 and > 0");
  if (passes == 0) return;
  DS2_CHECK(has_running_statistics(am),
            "batch-norm adaptation: this model normalizes every utterance by its own statistics "
            "(model.batch_norm_statistics: utterance) and keeps no running statistics to adapt");
  if (dataset.examples.empty()) return;
  std::vector<int> order(dataset.examples.size());
  std::iota(order.begin(), order.end(), 0);
  Rng rng(am.config.run.seed);
  Loader loader(dataset, *am.featurizer, threads, /*prefetch=*/4);
  for (int pass = 0; pass < passes; ++pass) {
    // Shuffled, as training batches are: batches of one length class would skew the statistics.
    for (size_t i = order.size(); i > 1; --i)
      std::swap(order[i - 1], order[rng.uniform_int(0, static_cast<int>(i) - 1)]);
    std::vector<std::vector<int>> batches;
    for (size_t i = 0; i < order.size(); i += batch_size)
      batches.emplace_back(order.begin() + i,
                           order.begin() + std::min(order.size(), i + size_t(batch_size)));
    loader.start_epoch(std::move(batches), am.config.run.seed, pass, /*augment=*/false);
    while (const Batch* batch = loader.next()) {
      if (batch->examples.empty()) continue;
      am.model->forward(batch->features, /*training=*/true);
    }
  }
}

}  // namespace ds2
