// TensorBoard event files written by ds2 itself (no TensorFlow, no protobuf library): scalars as
// serialized Event protos in TFRecord framing, so `tensorboard --logdir RUN` plots the curves.
//
//   ds2::TensorBoardWriter tb("runs/fsdd/tb");  // runs/fsdd/tb/events.out.tfevents.<secs>.<host>
//   tb.add_scalars(120, {{"train/loss", 12.5}, {"train/lr", 3e-4}});
//   tb.add_scalar("eval/wer", 0.0113, 188);
//   tb.add_session_start(120);  // a resumed run: TensorBoard drops earlier files' points >= 120
//
// A record is: uint64 length, masked CRC32C of those 8 bytes, the data, masked CRC32C of the
// data (little-endian; mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8). The first record is an
// Event with file_version "brain.Event:2"; each later one an Event {wall_time, step, summary}
// whose Summary holds the values {tag, simple_value}. The file is flushed to the operating system
// after every record, so a crash of the process loses at most the record being written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace ds2 {

// TFRecord's masked form of crc32c(data) (core/checksum.h).
uint32_t masked_crc32c(const void* data, size_t size);
// One TFRecord: length, masked CRC of the length, `data`, masked CRC of `data`.
std::string tfrecord_frame(const std::string& data);

struct ScalarValue {
  std::string tag;
  double value = 0;  // written as a float (simple_value)
};

// Serialized Event protos: the file-version header record, a summary of scalars, and a
// SessionLog {status: START}.
std::string encode_file_version_event(double wall_time, const std::string& version);
std::string encode_scalars_event(double wall_time, int64_t step,
                                 const std::vector<ScalarValue>& values);
std::string encode_session_start_event(double wall_time, int64_t step);

class TensorBoardWriter {
 public:
  // Creates `dir` if needed and a new file events.out.tfevents.<unix seconds>.<hostname> in it
  // (".1", ".2", ... appended when a file of that name exists), starting with the version record.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One Event at `step` holding every value (stamped with the current wall-clock time).
  void add_scalars(int64_t step, const std::vector<ScalarValue>& values);
  void add_scalar(const std::string& tag, double value, int64_t step);
  // Marks that training (re)starts at `step`. TensorBoard treats every START after a run's first
  // as a restart and drops the points at or after `step` that earlier files of the run hold, so
  // a resumed run's curves do not zigzag over the steps it logs again. Call it at every start.
  void add_session_start(int64_t step);
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace ds2
