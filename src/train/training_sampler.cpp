#include "train/training_sampler.h"

#include <map>
#include <string>
#include <vector>

#include "core/error.h"

namespace ds2 {

BatchSampler training_sampler(const Config& cfg, const Dataset& train, int rank, int world_size) {
  std::vector<double> durations;
  for (const Example& ex : train.examples) durations.push_back(ex.duration_s);
  BatchSampler sampler(durations, cfg.train.batch_size, cfg.train.sortagrad,
                       static_cast<uint64_t>(cfg.run.seed), rank, world_size);
  if (cfg.data.speaker_batches) {
    std::map<std::string, int> ids;
    std::vector<int> groups;
    for (const Example& ex : train.examples) {
      const Utterance& u = ex.utterance;
      DS2_CHECK(!u.speaker.empty(), u.manifest << ":" << u.line << ": " << u.id
                                               << ": no \"speaker\" (data.speaker_batches is on)");
      groups.push_back(ids.emplace(u.speaker, static_cast<int>(ids.size())).first->second);
    }
    sampler.set_groups(std::move(groups));
  }
  return sampler;
}

}  // namespace ds2
