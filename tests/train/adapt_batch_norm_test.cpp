#include "train/adapt_batch_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/temp_dir.h"
#include "support/tiny_model.h"

namespace ds2 {
namespace {

bool is_statistic(const std::string& name) {
  return name.find("running_") != std::string::npos;
}

std::map<std::string, std::vector<float>> tensors(const AcousticModel& am) {
  std::map<std::string, std::vector<float>> out;
  for (const NamedTensor& t : am.to_checkpoint().tensors) out[t.name] = t.data;
  return out;
}

// Largest |a - b| over the batch-norm statistics.
double statistics_change(const std::map<std::string, std::vector<float>>& a,
                         const std::map<std::string, std::vector<float>>& b) {
  double worst = 0;
  for (const auto& [name, values] : a)
    if (is_statistic(name))
      for (size_t i = 0; i < values.size(); ++i)
        worst = std::max(worst, std::abs(double(values[i]) - b.at(name)[i]));
  return worst;
}

// On a speaker the tiny model never heard: only running means and variances move, the same
// way twice, towards a fixed point (the new speaker's statistics), and 0 passes do nothing.
TEST(AdaptBatchNorm, MovesOnlyTheStatisticsReproduciblyTowardsTheNewAudio) {
  TempDir dir;
  const std::string lucas = testing::write_connected_digits(dir.path(), "lucas", 12, 3);
  AcousticModel am = AcousticModel::load(testing::shared_tiny_model().checkpoint);
  const Dataset ds = load_dataset(lucas, am.dataset_checks(), 1);
  ASSERT_EQ(ds.examples.size(), 12u);
  const auto before = tensors(am);
  int statistics = 0;
  for (const auto& [name, values] : before) statistics += is_statistic(name);
  ASSERT_GE(statistics, 4) << "the tiny model has batch norm in its conv and recurrent layers";

  adapt_batch_norm(am, ds, 0, 4, 1);
  EXPECT_EQ(tensors(am), before);

  adapt_batch_norm(am, ds, 2, 4, 2);
  const auto after = tensors(am);
  for (const auto& [name, values] : before) {
    if (is_statistic(name))
      EXPECT_NE(after.at(name), values) << name << " did not move";
    else
      EXPECT_EQ(after.at(name), values) << name << " is a weight: adaptation must not touch it";
  }

  AcousticModel again = AcousticModel::load(testing::shared_tiny_model().checkpoint);
  adapt_batch_norm(again, ds, 2, 4, 1);  // another thread count, same batches
  EXPECT_EQ(tensors(again), after);

  // With momentum 0.1 per batch (3 batches a pass), 40 more passes converge: one pass after
  // that moves the statistics far less than the first two did.
  const double first = statistics_change(before, after);
  adapt_batch_norm(am, ds, 40, 4, 2);
  const auto converged = tensors(am);
  adapt_batch_norm(am, ds, 1, 4, 2);
  const double last = statistics_change(converged, tensors(am));
  EXPECT_GT(first, 0.0);
  EXPECT_LT(last, 0.25 * first) << "first passes moved " << first << ", a late pass " << last;
}

TEST(AdaptBatchNorm, RejectsNonsenseArguments) {
  AcousticModel am = AcousticModel::load(testing::shared_tiny_model().checkpoint);
  const Dataset empty;
  EXPECT_THROW(adapt_batch_norm(am, empty, -1, 4, 1), Error);
  EXPECT_THROW(adapt_batch_norm(am, empty, 1, 0, 1), Error);
  EXPECT_NO_THROW(adapt_batch_norm(am, empty, 3, 4, 1));  // nothing to adapt to
}

// Such a model normalizes every recording by its own frames already: adaptation says so.
TEST(AdaptBatchNorm, RefusesAModelWithPerUtteranceStatistics) {
  AcousticModel am = AcousticModel::load(testing::shared_tiny_model().checkpoint);
  EXPECT_TRUE(has_running_statistics(am));
  am.config.model.batch_norm_statistics = "utterance";
  EXPECT_FALSE(has_running_statistics(am));
  const Dataset empty;
  EXPECT_NO_THROW(adapt_batch_norm(am, empty, 0, 4, 1));
  try {
    adapt_batch_norm(am, empty, 2, 4, 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("keeps no running statistics to adapt"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ds2
