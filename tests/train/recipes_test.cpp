// Recipes that are stated to be another recipe plus overrides stay so: the README's numbers for
// configs/fsdd-gru.yaml were measured as configs/fsdd.yaml with model.rnn_type=gru.
#include <gtest/gtest.h>

#include <string>

#include "train/config.h"

namespace ds2 {
namespace {

TEST(Recipes, FsddGruIsTheDigitsRecipeWithGruLayers) {
  const std::string dir = std::string(DS2_SOURCE_DIR) + "/configs/";
  const Config gru = load_config(dir + "fsdd-gru.yaml");
  const Config relu =
      load_config(dir + "fsdd.yaml", {"model.rnn_type=gru", "run.dir=runs/fsdd-gru"});
  EXPECT_EQ(gru.resolved_yaml, relu.resolved_yaml);
  EXPECT_NE(gru.resolved_yaml.find("rnn_type: gru"), std::string::npos);
}

}  // namespace
}  // namespace ds2
