// A scratch folder for one test, removed with everything in it when the test ends.
//
//   ds2::TempDir dir;
//   std::string path = dir.file("a.wav");
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace ds2 {

class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string name = std::string("ds2_") + (info ? info->test_suite_name() : "test") + "_" +
                             (info ? info->name() : "x") + "_" + std::to_string(::getpid()) +
                             "_" + std::to_string(next_serial());
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  // Folders made outside a test (suite fixtures, shared models) would otherwise share one name,
  // and a second one would wipe the first.
  static int next_serial() {
    static std::atomic<int> serial{0};
    return serial++;
  }
  std::filesystem::path path_;
};

}  // namespace ds2
