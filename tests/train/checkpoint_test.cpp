#include "train/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/checksum.h"
#include "core/error.h"
#include "support/temp_dir.h"

namespace ds2 {
namespace {

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ck_.metadata["config"] = "optim:\n  lr: 0.1\n";
    ck_.tensors.push_back({"a.weight", {2, 3}, {1, -2, 3.5f, 4, 5, 6}});
    ck_.tensors.push_back({"b.bias", {3}, {0.25f, -0.5f, 7}});
  }
  std::string file(const std::string& name) { return (dir_ / name).string(); }
  std::string error_loading(const std::string& path) {
    try {
      load_checkpoint(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  TempDir temp_;
  const std::filesystem::path& dir_ = temp_.path();
  Checkpoint ck_;
};

TEST_F(CheckpointTest, RoundTripKeepsTensorsAndMetadata) {
  save_checkpoint(file("x.ckpt"), ck_);
  Checkpoint back = load_checkpoint(file("x.ckpt"));
  EXPECT_EQ(back.meta("config"), ck_.metadata["config"]);
  ASSERT_NE(back.find("a.weight"), nullptr);
  EXPECT_EQ(back.find("a.weight")->shape, (Shape{2, 3}));
  EXPECT_EQ(back.find("a.weight")->data, ck_.tensors[0].data);
  EXPECT_EQ(back.find("b.bias")->data, ck_.tensors[1].data);
  EXPECT_THROW(back.meta("missing"), Error);
  // No temporary files are left behind by the atomic write.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), {}), 1);
}

TEST_F(CheckpointTest, HeaderIsSafetensorsLayout) {
  save_checkpoint(file("x.ckpt"), ck_);
  const std::string bytes = read_file(file("x.ckpt"));
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 9 * sizeof(float));
  EXPECT_NE(bytes.find("\"data_offsets\":[24,36]"), std::string::npos);
}

TEST_F(CheckpointTest, FlippedByteNamesTheTensor) {
  save_checkpoint(file("x.ckpt"), ck_);
  std::string bytes = read_file(file("x.ckpt"));
  bytes[bytes.size() - 2] ^= 0x10;  // inside b.bias
  std::ofstream(file("x.ckpt"), std::ios::binary) << bytes;
  const std::string msg = error_loading(file("x.ckpt"));
  EXPECT_NE(msg.find("x.ckpt: tensor 'b.bias' fails its checksum"), std::string::npos) << msg;
}

// Each tensor's CRC-32C is in the metadata; a checkpoint written before CRC-32C (zlib CRC-32 under
// "ds2.crc32") still loads, verified with its own CRC.
TEST_F(CheckpointTest, ChecksumsAreCrc32cAndOlderCrc32FilesStillVerify) {
  save_checkpoint(file("x.ckpt"), ck_);
  const std::string bytes = read_file(file("x.ckpt"));
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  const std::string data = bytes.substr(8 + n);
  const nlohmann::json crcs =
      nlohmann::json::parse(header["__metadata__"]["ds2.crc32c"].get<std::string>());
  nlohmann::json legacy = nlohmann::json::object();
  for (const auto& t : ck_.tensors) {
    const size_t size = t.data.size() * sizeof(float);
    EXPECT_EQ(crcs.at(t.name).get<uint32_t>(), crc32c(t.data.data(), size)) << t.name;
    legacy[t.name] = crc32(t.data.data(), size);
  }
  header["__metadata__"].erase("ds2.crc32c");
  header["__metadata__"]["ds2.crc32"] = legacy.dump();
  auto write = [&](std::string payload) {
    std::string json = header.dump();
    json.append((8 - json.size() % 8) % 8, ' ');
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i)
      out[i] = static_cast<char>((uint64_t(json.size()) >> (8 * i)) & 0xFF);
    std::ofstream(file("old.ckpt"), std::ios::binary) << out + json + payload;
  };
  write(data);
  const Checkpoint back = load_checkpoint(file("old.ckpt"));
  EXPECT_EQ(back.find("b.bias")->data, ck_.tensors[1].data);
  EXPECT_EQ(back.metadata.count("ds2.crc32"), 0u);
  std::string flipped = data;
  flipped[0] ^= 0x01;  // inside a.weight
  write(flipped);
  EXPECT_NE(error_loading(file("old.ckpt")).find("tensor 'a.weight' fails its checksum"),
            std::string::npos);
  // The standard check values.
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32("123456789", 9), 0xCBF43926u);
}

TEST_F(CheckpointTest, TruncatedFileIsRefused) {
  save_checkpoint(file("x.ckpt"), ck_);
  const auto size = std::filesystem::file_size(file("x.ckpt"));
  std::filesystem::resize_file(file("x.ckpt"), size - 4);
  EXPECT_NE(error_loading(file("x.ckpt")).find("'b.bias' lies beyond the end"), std::string::npos);
  std::filesystem::resize_file(file("x.ckpt"), 20);
  EXPECT_NE(error_loading(file("x.ckpt")).find("truncated checkpoint"), std::string::npos);
  EXPECT_NE(error_loading(file("none.ckpt")).find("cannot open"), std::string::npos);
}

}  // namespace
}  // namespace ds2
