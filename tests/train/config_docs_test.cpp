#include <gtest/gtest.h>

#include <sstream>

#include "core/atomic_file.h"
#include "train/config.h"

namespace ds2 {
namespace {

// configs/README.md documents every key with its default; it must not drift from the schema.
TEST(ConfigDocs, ReferenceListsEveryKeyWithItsDefault) {
  const std::string doc = read_file(std::string(DS2_SOURCE_DIR) + "/configs/README.md");
  std::istringstream keys(describe_config_keys());
  std::string line;
  int n = 0;
  while (std::getline(keys, line)) {
    EXPECT_NE(doc.find(line + "\n"), std::string::npos) << "configs/README.md lacks: " << line;
    ++n;
  }
  EXPECT_GT(n, 50);
}

}  // namespace
}  // namespace ds2
