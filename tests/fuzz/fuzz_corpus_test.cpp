// Replays the saved fuzz corpora (tests/fuzz/corpus/<target>/: seeds and every input that once
// crashed a parser) through the same targets the libFuzzer binaries run, with any compiler: each
// input must end in success or a caught ds2::Error, never in another exception.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_targets.h"

namespace ds2::fuzz {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> corpus_files(const std::string& target) {
  const fs::path dir = fs::path(DS2_SOURCE_DIR) / "tests" / "fuzz" / "corpus" / target;
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

class FuzzCorpus : public ::testing::TestWithParam<FuzzTarget> {};

TEST_P(FuzzCorpus, EveryInputEndsInSuccessOrDs2Error) {
  const FuzzTarget target = GetParam();
  const std::vector<fs::path> files = corpus_files(target.name);
  ASSERT_GE(files.size(), 3u) << "corpus of '" << target.name << "' missing or nearly empty";
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    try {
      target.one(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    } catch (const std::exception& e) {
      ADD_FAILURE() << file.filename().string() << ": " << e.what();
    } catch (...) {
      ADD_FAILURE() << file.filename().string() << ": an exception that is not std::exception";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzCorpus, ::testing::ValuesIn(fuzz_targets()),
                         [](const ::testing::TestParamInfo<FuzzTarget>& info) {
                           return std::string(info.param.name);
                         });

// The targets themselves hold to their contract on inputs known to be good and bad.
TEST(FuzzTargets, GoodAndBadInputsPass) {
  auto run = [](int (*one)(const uint8_t*, size_t), const std::string& text) {
    one(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  };
  EXPECT_NO_THROW(run(fuzz_config_one, "optim:\n  lr: 0.01\n"));
  EXPECT_NO_THROW(run(fuzz_config_one, "optim: [\n"));
  EXPECT_NO_THROW(run(fuzz_override_one, "optim.lr=0.5\ntrain.epochs=3"));
  EXPECT_NO_THROW(run(fuzz_override_one, "optim.lr"));
  EXPECT_NO_THROW(run(fuzz_manifest_one,
                      "{\"audio_filepath\": \"a.wav\", \"duration\": 1, \"text\": \"a\"}\n{]\n"));
  EXPECT_NO_THROW(run(fuzz_audio_one, "RIFF...."));
  EXPECT_THROW(check_error_message("a: b\nc", "a:", "test"), PropertyViolation);
  EXPECT_THROW(check_error_message("x: b", "a:", "test"), PropertyViolation);
  EXPECT_NO_THROW(check_error_message("a: b", "a:", "test"));
}

}  // namespace
}  // namespace ds2::fuzz
