// TensorBoard event files written directly (no protobuf library): the TFRecord framing with masked CRC-32C
// and the few Event/Summary fields scalars need. Every run writes one, so `tensorboard --logdir runs` shows
// loss, learning rate, loss scale and evaluation curves, live (each record is flushed).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace mpt::io {

uint32_t crc32c(const void* data, size_t size);
uint32_t masked_crc32c(const void* data, size_t size);

// The serialized Event protobuf for one scalar, and for the file_version header event.
std::string encode_scalar_event(double wall_time, int64_t step, const std::string& tag, float value);
std::string encode_file_version_event(double wall_time);
// SessionLog START at `step`: TensorBoard then drops what earlier files logged at `step` and later.
std::string encode_session_start_event(double wall_time, int64_t step);

// One TFRecord: u64 length | u32 masked crc of length | data | u32 masked crc of data (little-endian).
std::string frame_record(const std::string& data);

class TensorBoardWriter {
 public:
  // Creates DIR/events.out.tfevents.<secs>.<host>.<pid>.<n> with its file_version record.
  explicit TensorBoardWriter(const std::string& folder);  // "": writes nothing (ranks other than 0)
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  void scalar(const std::string& tag, int64_t step, double value);
  // A resumed run re-logs the steps after its checkpoint: from `step` on, TensorBoard keeps this file's values.
  void restart_at(int64_t step);
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);

  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace mpt::io
