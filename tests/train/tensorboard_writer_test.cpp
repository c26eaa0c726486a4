#include "train/tensorboard_writer.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/atomic_file.h"
#include "core/checksum.h"
#include "core/error.h"
#include "support/fsdd_fixture.h"
#include "support/temp_dir.h"
#include "train/trainer.h"

namespace ds2 {
namespace {

namespace fs = std::filesystem;

// ---- a reader of the format, written for the test from the format's description ----------------

uint64_t little_endian(const std::string& bytes, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes.at(at + i));
  return v;
}

uint32_t mask(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

// Splits a TFRecord file into its records, checking each length and both CRCs.
std::vector<std::string> read_records(const std::string& file) {
  std::vector<std::string> records;
  size_t at = 0;
  while (at < file.size()) {
    DS2_CHECK(file.size() - at >= 12, "truncated header at byte " << at);
    const uint64_t length = little_endian(file, at, 8);
    DS2_CHECK(little_endian(file, at + 8, 4) == mask(crc32c(file.data() + at, 8)),
              "length CRC mismatch at byte " << at);
    DS2_CHECK(file.size() - at - 12 >= length + 4, "truncated record at byte " << at);
    std::string data = file.substr(at + 12, length);
    DS2_CHECK(little_endian(file, at + 12 + length, 4) == mask(crc32c(data.data(), data.size())),
              "data CRC mismatch at byte " << at);
    records.push_back(std::move(data));
    at += 12 + length + 4;
  }
  return records;
}

struct ProtoField {
  uint32_t number = 0;
  uint32_t wire = 0;
  uint64_t varint = 0;  // wire 0; also the raw bits of wire 1 (fixed64) and 5 (fixed32)
  std::string bytes;    // wire 2
};

uint64_t read_varint(const std::string& m, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    DS2_CHECK(at < m.size() && shift < 64, "bad varint");
    const auto b = static_cast<unsigned char>(m[at++]);
    v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
}

std::vector<ProtoField> decode_message(const std::string& m) {
  std::vector<ProtoField> fields;
  size_t at = 0;
  while (at < m.size()) {
    ProtoField f;
    const uint64_t key = read_varint(m, at);
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire = static_cast<uint32_t>(key & 7);
    if (f.wire == 0) {
      f.varint = read_varint(m, at);
    } else if (f.wire == 1 || f.wire == 5) {
      const int n = f.wire == 1 ? 8 : 4;
      DS2_CHECK(at + n <= m.size(), "truncated fixed field");
      f.varint = little_endian(m, at, n);
      at += n;
    } else if (f.wire == 2) {
      const uint64_t n = read_varint(m, at);
      DS2_CHECK(at + n <= m.size(), "truncated length-delimited field");
      f.bytes = m.substr(at, n);
      at += n;
    } else {
      DS2_FAIL("unexpected wire type " << f.wire);
    }
    fields.push_back(std::move(f));
  }
  return fields;
}

struct DecodedEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<std::pair<std::string, float>> values;
  bool session_start = false;  // SessionLog {status: START}
};

DecodedEvent decode_event(const std::string& data) {
  DecodedEvent e;
  for (const ProtoField& f : decode_message(data)) {
    if (f.number == 1 && f.wire == 1) {
      std::memcpy(&e.wall_time, &f.varint, 8);
    } else if (f.number == 2 && f.wire == 0) {
      e.step = static_cast<int64_t>(f.varint);
    } else if (f.number == 3 && f.wire == 2) {
      e.file_version = f.bytes;
    } else if (f.number == 5 && f.wire == 2) {
      for (const ProtoField& v : decode_message(f.bytes)) {
        DS2_CHECK(v.number == 1 && v.wire == 2, "Summary: unexpected field " << v.number);
        std::pair<std::string, float> value;
        for (const ProtoField& x : decode_message(v.bytes)) {
          if (x.number == 1 && x.wire == 2) {
            value.first = x.bytes;
          } else if (x.number == 2 && x.wire == 5) {
            const auto bits = static_cast<uint32_t>(x.varint);
            std::memcpy(&value.second, &bits, 4);
          } else {
            DS2_FAIL("Summary.Value: unexpected field " << x.number);
          }
        }
        e.values.push_back(value);
      }
    } else if (f.number == 7 && f.wire == 2) {
      const std::vector<ProtoField> log = decode_message(f.bytes);
      DS2_CHECK(log.size() == 1 && log[0].number == 1 && log[0].wire == 0,
                "SessionLog: expected only a status");
      e.session_start = log[0].varint == 1;
    } else {
      DS2_FAIL("Event: unexpected field " << f.number << " wire type " << f.wire);
    }
  }
  return e;
}

std::vector<DecodedEvent> read_events(const std::string& path) {
  std::vector<DecodedEvent> events;
  for (const std::string& r : read_records(read_file(path))) events.push_back(decode_event(r));
  return events;
}

std::string bytes_of(std::initializer_list<int> v) {
  std::string s;
  for (int b : v) s.push_back(static_cast<char>(b));
  return s;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// ---- CRC, framing and encoding against known values ---------------------------------------------

TEST(TensorBoard, Crc32cMatchesPublishedCheckValues) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  // RFC 3720 (iSCSI) appendix B.4.
  std::string zeros(32, '\0'), ones(32, '\xff'), ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c(ascending.data(), 32), 0x46DD794Eu);
  // TensorBoard's masked_crc32c(b"123456789").
  EXPECT_EQ(masked_crc32c("123456789", 9), 0xC78AB0E5u);
}

// The golden bytes are what TensorBoard's protobuf classes serialize for the same Event
// (tensorboard.compat.proto.event_pb2, TensorBoard 2.21).
const std::string kGoldenScalars =
    bytes_of({0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf8, 0x3f, 0x10, 0x07, 0x2a, 0x1d, 0x0a,
              0x08, 0x0a, 0x01, 0x61, 0x15, 0x00, 0x00, 0x00, 0x3f, 0x0a, 0x11, 0x0a, 0x0a, 0x74,
              0x72, 0x61, 0x69, 0x6e, 0x2f, 0x6c, 0x6f, 0x73, 0x73, 0x15, 0x00, 0x00, 0x10, 0xc0});

TEST(TensorBoard, EventsEncodeAsProtobufDoes) {
  EXPECT_EQ(encode_scalars_event(1.5, 7, {{"a", 0.5}, {"train/loss", -2.25}}), kGoldenScalars);
  EXPECT_EQ(encode_file_version_event(1700000000.25, "brain.Event:2"),
            bytes_of({0x09, 0x00, 0x00, 0x10, 0x40, 0xfc, 0x54, 0xd9, 0x41, 0x1a, 0x0d, 0x62,
                      0x72, 0x61, 0x69, 0x6e, 0x2e, 0x45, 0x76, 0x65, 0x6e, 0x74, 0x3a, 0x32}));
  EXPECT_EQ(encode_session_start_event(2.0, 120),
            bytes_of({0x09, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x10, 0x78, 0x3a, 0x02, 0x08, 0x01}));
  // A step above 127 takes a two-byte varint (300 = 0xac 0x02).
  const std::string e = encode_scalars_event(2.0, 300, {{"x", 1.0}});
  EXPECT_EQ(e.substr(9, 3), bytes_of({0x10, 0xac, 0x02}));
}

TEST(TensorBoard, RecordFramingHasLengthDataAndMaskedCrcs) {
  const std::string framed = tfrecord_frame(kGoldenScalars);
  ASSERT_EQ(framed.size(), 8 + 4 + 42 + 4u);
  EXPECT_EQ(framed.substr(0, 8), bytes_of({0x2a, 0, 0, 0, 0, 0, 0, 0}));
  // Values from TensorBoard's masked_crc32c on the same bytes.
  EXPECT_EQ(little_endian(framed, 8, 4), 0xf5918daeu);
  EXPECT_EQ(framed.substr(12, 42), kGoldenScalars);
  EXPECT_EQ(little_endian(framed, 54, 4), 0xc38bfed4u);
  // A flipped bit anywhere is caught by the reader.
  std::string bad = framed;
  bad[20] ^= 0x04;
  EXPECT_THROW(read_records(bad), Error);
  bad = framed;
  bad[0] = 0x2b;
  EXPECT_THROW(read_records(bad), Error);
}

// ---- the writer ---------------------------------------------------------------------------------

TEST(TensorBoard, WriterFileReadsBackRecordByRecordWhileOpen) {
  TempDir temp;
  const double before = now_seconds();
  TensorBoardWriter tb((temp.path() / "tb").string());
  tb.add_session_start(1);
  tb.add_scalars(1, {{"train/loss", 41.25}, {"train/lr", 3e-4}});
  tb.add_scalar("eval/wer", 0.0113, 2);
  tb.add_scalars(300, {{"train/loss", -0.5}, {"train/grad_norm", 1e9}});
  const double after = now_seconds();

  // The name: events.out.tfevents.<unix seconds>.<hostname>, in the folder it was given.
  const fs::path path(tb.path());
  EXPECT_EQ(path.parent_path(), temp.path() / "tb");
  const std::string name = path.filename().string();
  const std::string prefix = "events.out.tfevents.";
  ASSERT_EQ(name.rfind(prefix, 0), 0u) << name;
  const size_t dot = name.find('.', prefix.size());
  const int64_t secs = std::stoll(name.substr(prefix.size(), dot - prefix.size()));
  EXPECT_GE(secs, static_cast<int64_t>(before));
  EXPECT_LE(secs, static_cast<int64_t>(after));
  char host[256] = {0};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  EXPECT_EQ(name.substr(dot + 1), host);

  // Flushed after each record: everything is readable before the writer is closed.
  std::vector<DecodedEvent> events = read_events(tb.path());
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_TRUE(events[0].values.empty());
  for (const DecodedEvent& e : events) {
    EXPECT_GE(e.wall_time, before - 1e-3);
    EXPECT_LE(e.wall_time, after + 1e-3);
  }
  EXPECT_FALSE(events[0].session_start);
  EXPECT_TRUE(events[1].session_start);
  EXPECT_EQ(events[1].step, 1);
  EXPECT_TRUE(events[1].values.empty());
  events.erase(events.begin() + 1);
  EXPECT_EQ(events[1].step, 1);
  ASSERT_EQ(events[1].values.size(), 2u);
  EXPECT_EQ(events[1].values[0].first, "train/loss");
  EXPECT_EQ(events[1].values[0].second, 41.25f);
  EXPECT_EQ(events[1].values[1].first, "train/lr");
  EXPECT_EQ(events[1].values[1].second, 3e-4f);
  EXPECT_EQ(events[2].step, 2);
  ASSERT_EQ(events[2].values.size(), 1u);
  EXPECT_EQ(events[2].values[0].first, "eval/wer");
  EXPECT_EQ(events[2].values[0].second, 0.0113f);
  EXPECT_EQ(events[3].step, 300);
  ASSERT_EQ(events[3].values.size(), 2u);
  EXPECT_EQ(events[3].values[0].second, -0.5f);
  EXPECT_EQ(events[3].values[1].first, "train/grad_norm");
  EXPECT_EQ(events[3].values[1].second, 1e9f);
}

TEST(TensorBoard, SecondWriterInTheSameFolderGetsItsOwnFile) {
  TempDir temp;
  TensorBoardWriter a(temp.path().string()), b(temp.path().string());
  EXPECT_NE(a.path(), b.path());
  a.add_scalar("x", 1, 1);
  EXPECT_EQ(read_events(a.path()).size(), 2u);
  EXPECT_EQ(read_events(b.path()).size(), 1u);
}

TEST(TensorBoard, UnwritableFolderIsAnErrorNamingIt) {
  TempDir temp;
  write_file_atomic(temp.file("plain-file"), "x");
  const std::string dir = temp.file("plain-file") + "/tb";
  try {
    TensorBoardWriter tb(dir);
    FAIL() << "no error for " << dir;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << e.what();
  }
}

// ---- the trainer writes the same numbers as metrics.jsonl; TensorBoard itself reads them --------

struct Command {
  int code;
  std::string output;
};

Command run_command(const std::string& cmd) {
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

Config tiny_config(const fs::path& dir, const std::string& manifest) {
  Config cfg = parse_config(
      "run: {seed: 2, threads: 1}\n"
      "features: {sample_rate: 8000}\n"
      "model: {conv: [], rnn_layers: 1, rnn_hidden: 16, bidirectional: false}\n"
      "train: {epochs: 2, batch_size: 4, log_every: 2}\n");
  cfg.run.dir = (dir / "run").string();
  cfg.data.train_manifest = manifest;
  cfg.data.dev_manifest = manifest;
  return cfg;
}

// One tiny training run shared by the tests below.
class TrainerTensorBoard : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    temp_ = new TempDir;
    const std::string manifest =
        testing::write_digit_manifest(temp_->path(), "yweweler", {0, 8}, 5);
    try {
      steps_ = Trainer(tiny_config(temp_->path(), manifest)).run().steps;
      for (const auto& entry : fs::directory_iterator(temp_->path() / "run" / "tb"))
        files_.push_back(entry.path().string());
    } catch (const std::exception& e) {
      error_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    delete temp_;
    temp_ = nullptr;
  }
  void SetUp() override {
    ASSERT_EQ(error_, "");
    ASSERT_EQ(steps_, 6);  // 10 utterances in batches of 4: 3 steps an epoch, 2 epochs
    ASSERT_EQ(files_.size(), 1u);
  }
  static fs::path run_dir() { return temp_->path() / "run"; }

  static TempDir* temp_;
  static int64_t steps_;
  static std::vector<std::string> files_;
  static std::string error_;
};
TempDir* TrainerTensorBoard::temp_ = nullptr;
int64_t TrainerTensorBoard::steps_ = 0;
std::vector<std::string> TrainerTensorBoard::files_;
std::string TrainerTensorBoard::error_;

TEST_F(TrainerTensorBoard, EventsCarryTheNumbersOfMetricsJsonl) {
  const std::vector<DecodedEvent> events = read_events(files_[0]);
  EXPECT_NE(read_file((run_dir() / "train.log").string()).find("tensorboard: " + files_[0]),
            std::string::npos);

  // One event per metrics.jsonl line, in the same order, with the same numbers (as floats):
  // train at steps 2, 4, 6 (log_every 2), eval at the end of each epoch (steps 3 and 6).
  std::ifstream metrics(run_dir() / "metrics.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(metrics, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 5u);
  ASSERT_EQ(events.size(), lines.size() + 2);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_TRUE(events[1].session_start);  // training starts at step 0
  EXPECT_EQ(events[1].step, 0);
  const std::vector<int64_t> steps = {2, 3, 4, 6, 6};
  for (size_t i = 0; i < lines.size(); ++i) {
    const nlohmann::json& m = lines[i];
    const DecodedEvent& e = events[i + 2];
    SCOPED_TRACE(m.dump());
    EXPECT_EQ(e.step, steps[i]);
    EXPECT_EQ(e.step, m["step"].get<int64_t>());
    std::vector<std::pair<std::string, std::string>> expected;  // tag, metrics key
    if (m["event"] == "train")
      expected = {{"train/loss", "loss"},
                  {"train/lr", "lr"},
                  {"train/grad_norm", "grad_norm"},
                  {"train/utt_per_s", "utt_per_s"},
                  {"train/audio_s_per_s", "audio_s_per_s"},
                  {"train/data_wait_fraction", "data_wait_fraction"}};
    else
      expected = {{"eval/wer", "wer"}, {"eval/cer", "cer"}};
    ASSERT_EQ(e.values.size(), expected.size());
    for (size_t k = 0; k < expected.size(); ++k) {
      EXPECT_EQ(e.values[k].first, expected[k].first);
      EXPECT_EQ(e.values[k].second, static_cast<float>(m[expected[k].second].get<double>()));
    }
  }
  EXPECT_GT(events[2].values[0].second, 1.0f);  // a CTC loss, not a placeholder
  EXPECT_GT(events[2].values[3].second, 0.0f);  // utterances per second
  EXPECT_GE(events[2].values[5].second, 0.0f);  // a share of the window spent waiting for data
  EXPECT_LE(events[2].values[5].second, 1.0f);
}

// TensorBoard's own loader (it checks both CRCs; a bad record would end its list early) reads
// every event back. Skipped, saying why, where python3 or the tensorboard package is missing.
TEST_F(TrainerTensorBoard, TensorBoardsOwnLoaderReadsEveryEvent) {
  const std::vector<DecodedEvent> events = read_events(files_[0]);
  std::string expected = "file_version brain.Event:2\n";
  for (const DecodedEvent& e : events) {
    if (e.session_start) expected += "session_start " + std::to_string(e.step) + "\n";
    for (const auto& [tag, value] : e.values) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "scalar %lld %s %.9g\n", static_cast<long long>(e.step),
                    tag.c_str(), static_cast<double>(value));
      expected += buf;
    }
  }
  expected += "records " + std::to_string(events.size()) + "\n";
  const Command py = run_command("python3 " + std::string(DS2_SOURCE_DIR) +
                                 "/tests/scripts/read_tfevents.py " + files_[0]);
  if (py.code == 77 || py.code == 127)
    GTEST_SKIP() << "TensorBoard's reader not run: "
                 << (py.code == 127 ? "python3 not found" : py.output);
  ASSERT_EQ(py.code, 0) << py.output;
  EXPECT_EQ(py.output, expected);
  EXPECT_EQ(events.size(), 7u);
}

TEST(TensorBoard, RunTensorboardFalseWritesNoEventFile) {
  TempDir temp;
  const std::string manifest = testing::write_digit_manifest(temp.path(), "yweweler", {0}, 4);
  Config cfg = tiny_config(temp.path(), manifest);
  cfg.run.tensorboard = false;
  cfg.train.epochs = 1;
  Trainer(cfg).run();
  EXPECT_TRUE(fs::exists(temp.path() / "run" / "metrics.jsonl"));
  EXPECT_FALSE(fs::exists(temp.path() / "run" / "tb"));
  EXPECT_EQ(read_file((temp.path() / "run" / "train.log").string()).find("tensorboard"),
            std::string::npos);
}

}  // namespace
}  // namespace ds2
