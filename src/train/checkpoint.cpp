#include "train/checkpoint.h"

#include <array>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/checksum.h"
#include "core/error.h"

namespace ds2 {

const NamedTensor* Checkpoint::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const std::string& Checkpoint::meta(const std::string& key) const {
  auto it = metadata.find(key);
  DS2_CHECK(it != metadata.end(), path << ": checkpoint metadata lacks '" << key << "'");
  return it->second;
}

void save_checkpoint(const std::string& path, const Checkpoint& checkpoint) {
  static_assert(sizeof(float) == 4, "float32 expected");
  nlohmann::json header = nlohmann::json::object();
  nlohmann::json crcs = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& t : checkpoint.tensors) {
    DS2_CHECK(static_cast<int64_t>(t.data.size()) == shape_numel(t.shape),
              path << ": tensor '" << t.name << "' has " << t.data.size() << " values for shape "
                   << shape_str(t.shape));
    const uint64_t bytes = t.data.size() * sizeof(float);
    header[t.name] = {{"dtype", "F32"},
                      {"shape", t.shape.to_vector()},
                      {"data_offsets", {offset, offset + bytes}}};
    crcs[t.name] = crc32c(t.data.data(), bytes);
    offset += bytes;
  }
  nlohmann::json meta = nlohmann::json::object();
  for (const auto& [k, v] : checkpoint.metadata) meta[k] = v;
  meta["ds2.crc32c"] = crcs.dump();
  header["__metadata__"] = meta;
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // safetensors pads the header to 8 bytes
  std::string out;
  out.reserve(8 + json.size() + offset);
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  out += json;
  for (const auto& t : checkpoint.tensors)
    out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * sizeof(float));
  write_file_atomic(path, out);
}

Checkpoint load_checkpoint(const std::string& path) {
  return parse_checkpoint(read_file(path), path);
}

Checkpoint parse_checkpoint(const std::string& bytes, const std::string& path) {
  DS2_CHECK(bytes.size() >= 8, path << ": not a checkpoint (file too short)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  DS2_CHECK(n <= bytes.size() - 8, path << ": truncated checkpoint (header of " << n
                                        << " bytes, file of " << bytes.size() << ")");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.substr(8, n));
  } catch (const nlohmann::json::exception& e) {
    DS2_FAIL(path << ": corrupt checkpoint header: " << e.what());
  }
  Checkpoint ck;
  ck.path = path;
  nlohmann::json crcs = nlohmann::json::object();
  bool castagnoli = true;  // which CRC the file's checksums are
  try {
    if (header.contains("__metadata__")) {
      for (const auto& [k, v] : header["__metadata__"].items())
        ck.metadata[k] = v.get<std::string>();
      for (const char* key : {"ds2.crc32c", "ds2.crc32"}) {
        auto it = ck.metadata.find(key);
        if (it == ck.metadata.end()) continue;
        if (crcs.empty()) {
          crcs = nlohmann::json::parse(it->second);
          castagnoli = std::string(key) == "ds2.crc32c";
        }
        ck.metadata.erase(it);
      }
    }
    const size_t data_start = 8 + n;
    for (const auto& [name, info] : header.items()) {
      if (name == "__metadata__") continue;
      DS2_CHECK(info.at("dtype") == "F32", path << ": tensor '" << name << "' has dtype "
                                                << info.at("dtype") << "; only F32 is supported");
      NamedTensor t;
      t.name = name;
      t.shape = Shape(info.at("shape").get<std::vector<int64_t>>());
      const uint64_t begin = info.at("data_offsets")[0], end = info.at("data_offsets")[1];
      DS2_CHECK(end >= begin && data_start + end <= bytes.size(),
                path << ": tensor '" << name << "' lies beyond the end of the file (truncated)");
      DS2_CHECK(end - begin == shape_numel(t.shape) * sizeof(float),
                path << ": tensor '" << name << "' size does not match its shape");
      t.data.resize((end - begin) / sizeof(float));
      std::memcpy(t.data.data(), bytes.data() + data_start + begin, end - begin);
      if (crcs.contains(name)) {
        const uint32_t crc =
            castagnoli ? crc32c(t.data.data(), end - begin) : crc32(t.data.data(), end - begin);
        DS2_CHECK(crcs[name].get<uint32_t>() == crc,
                  path << ": tensor '" << name << "' fails its checksum (corrupt file)");
      }
      ck.tensors.push_back(std::move(t));
    }
  } catch (const nlohmann::json::exception& e) {
    DS2_FAIL(path << ": corrupt checkpoint header: " << e.what());
  }
  return ck;
}

}  // namespace ds2
