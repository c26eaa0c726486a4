#include "train/tensorboard_writer.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/checksum.h"
#include "core/error.h"

namespace ds2 {

namespace {

// Protobuf wire format, the few pieces an Event needs.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, uint32_t field, WireType type) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | type);
}

void put_little_endian(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void put_double(std::string& out, uint32_t field, double v) {
  static_assert(sizeof(double) == 8, "IEEE double expected");
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kFixed64);
  put_little_endian(out, bits, 8);
}

void put_float(std::string& out, uint32_t field, float v) {
  static_assert(sizeof(float) == 4, "IEEE float expected");
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kFixed32);
  put_little_endian(out, bits, 4);
}

void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

// Event fields (tensorflow/core/util/event.proto) and Summary fields (summary.proto).
constexpr uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5,
                   kEventSessionLog = 7;
constexpr uint32_t kSummaryValue = 1, kValueTag = 1, kValueSimpleValue = 2;
constexpr uint32_t kSessionLogStatus = 1, kSessionLogStart = 1;

// wall_time and step, the fields every event begins with.
std::string event_header(double wall_time, int64_t step) {
  std::string event;
  put_double(event, kEventWallTime, wall_time);
  if (step != 0) {  // proto3 leaves fields at their default out
    put_key(event, kEventStep, kVarint);
    put_varint(event, static_cast<uint64_t>(step));  // int64: negatives as two's complement
  }
  return event;
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == 0) return "localhost";
  return buf;
}

}  // namespace

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tfrecord_frame(const std::string& data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_little_endian(out, data.size(), 8);
  put_little_endian(out, masked_crc32c(out.data(), 8), 4);
  out += data;
  put_little_endian(out, masked_crc32c(data.data(), data.size()), 4);
  return out;
}

std::string encode_file_version_event(double wall_time, const std::string& version) {
  std::string event = event_header(wall_time, 0);
  put_bytes(event, kEventFileVersion, version);
  return event;
}

std::string encode_scalars_event(double wall_time, int64_t step,
                                 const std::vector<ScalarValue>& values) {
  std::string summary;
  for (const ScalarValue& v : values) {
    std::string value;
    put_bytes(value, kValueTag, v.tag);
    put_float(value, kValueSimpleValue, static_cast<float>(v.value));
    put_bytes(summary, kSummaryValue, value);
  }
  std::string event = event_header(wall_time, step);
  put_bytes(event, kEventSummary, summary);
  return event;
}

std::string encode_session_start_event(double wall_time, int64_t step) {
  std::string session_log;
  put_key(session_log, kSessionLogStatus, kVarint);
  put_varint(session_log, kSessionLogStart);
  std::string event = event_header(wall_time, step);
  put_bytes(event, kEventSessionLog, session_log);
  return event;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  DS2_CHECK(!ec, dir << ": cannot create the TensorBoard folder: " << ec.message());
  const double now = unix_seconds();
  const std::string base =
      (std::filesystem::path(dir) /
       ("events.out.tfevents." + std::to_string(static_cast<int64_t>(now)) + "." + host_name()))
          .string();
  // "x": create, never open an existing file (another run in the same second, same host).
  for (int n = 0; file_ == nullptr; ++n) {
    path_ = n == 0 ? base : base + "." + std::to_string(n);
    file_ = std::fopen(path_.c_str(), "wbx");
    DS2_CHECK(file_ != nullptr || (errno == EEXIST && n < 1000),
              path_ << ": cannot create the TensorBoard event file: " << std::strerror(errno));
  }
  try {
    write_record(encode_file_version_event(now, "brain.Event:2"));
  } catch (...) {
    std::fclose(file_);
    throw;
  }
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::add_scalars(int64_t step, const std::vector<ScalarValue>& values) {
  write_record(encode_scalars_event(unix_seconds(), step, values));
}

void TensorBoardWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  add_scalars(step, {{tag, value}});
}

void TensorBoardWriter::add_session_start(int64_t step) {
  write_record(encode_session_start_event(unix_seconds(), step));
}

void TensorBoardWriter::write_record(const std::string& data) {
  const std::string record = tfrecord_frame(data);
  const bool ok = std::fwrite(record.data(), 1, record.size(), file_) == record.size() &&
                  std::fflush(file_) == 0;
  DS2_CHECK(ok, path_ << ": cannot write a TensorBoard record: " << std::strerror(errno));
}

}  // namespace ds2
