// Checkpoint files in the safetensors layout: an 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets}, "__metadata__": {string: string}}, then raw
// little-endian float32 data, so Python can read them with json + numpy. ds2 adds a CRC-32C of
// every tensor to the metadata ("ds2.crc32c") and verifies it on load (checkpoints written before
// CRC-32C carry "ds2.crc32", zlib's CRC-32, and are verified with that).
//
//   ds2::Checkpoint ck;
//   ck.metadata["config"] = cfg.resolved_yaml;
//   ck.tensors.push_back({"rnn0.fwd.W", {256, 672}, values});
//   ds2::save_checkpoint("runs/x/last.ckpt", ck);          // atomic
//   ds2::Checkpoint back = ds2::load_checkpoint("runs/x/last.ckpt");
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ds2 {

struct NamedTensor {
  std::string name;
  Shape shape;
  std::vector<float> data;
};

struct Checkpoint {
  std::map<std::string, std::string> metadata;
  std::vector<NamedTensor> tensors;

  const NamedTensor* find(const std::string& name) const;
  // Metadata value or throws naming the checkpoint and the key.
  const std::string& meta(const std::string& key) const;
  std::string path;  // set by load_checkpoint, for messages
};

void save_checkpoint(const std::string& path, const Checkpoint& checkpoint);
Checkpoint load_checkpoint(const std::string& path);
// A checkpoint from the bytes of its file (read elsewhere, e.g. by rank 0 and broadcast); `path`
// names it in messages.
Checkpoint parse_checkpoint(const std::string& bytes, const std::string& path);

}  // namespace ds2
