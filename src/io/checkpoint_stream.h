// The checkpoint container, version 2: named records streamed one at a time, so that writing or reading a checkpoint
// holds at most one tensor's staging copy beyond what training holds (version 1 was a zip built in memory).
//   "MPTCKPT\n" | u32 version 2 | u32 0
//   record*:  u32 name bytes | name | u8 kind | the kind's body
//     tensor   u8 dtype | u8 dims | i64 size x dims | u64 data bytes | the elements, contiguous, little-endian
//     integer  i64          real  f64          text  u64 bytes | bytes
//     pieces   u8 dtype | u8 dims | i64 size x dims | i64 stride x dims: a tensor whose elements are written as
//              pieces elsewhere (a ZeRO-1 shard)
//   "MPTDONE\n" | u64 record bytes | u32 CRC-32 of the records | u32 record count
// A writer streams into a temporary file and renames it when the trailer is written, as every mpt file is written.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace mpt::io {

inline constexpr uint32_t kStreamVersion = 2;

enum class RecordKind : uint8_t { kTensor = 1, kInteger = 2, kReal = 3, kText = 4, kPieces = 5 };

struct Record {
  std::string name;
  RecordKind kind = RecordKind::kTensor;
  torch::ScalarType dtype = torch::kFloat;
  std::vector<int64_t> sizes, strides;  // strides: kPieces only
  uint64_t bytes = 0;                   // a tensor's data or a text's bytes, still to read
  int64_t integer = 0;
  double real = 0.0;
  uint64_t offset = 0;  // the record's first byte in the file, for messages
};

// What a committed file is, for an index that names it: its size and its records' CRC.
struct CommittedFile {
  uint64_t bytes = 0;
  uint32_t crc = 0;
};

class CheckpointWriter {
 public:
  explicit CheckpointWriter(std::string path);
  ~CheckpointWriter();  // without commit(): the temporary file is removed, `path` untouched
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // A tensor on any device and in any layout: copied (one tensor at a time) only when not contiguous on the CPU.
  void tensor(const std::string& name, const torch::Tensor& value);
  // A tensor whose elements go to shards as pieces: its dtype, sizes and the strides of the layout they were cut from.
  void pieces(const std::string& name, torch::ScalarType dtype, torch::IntArrayRef sizes, torch::IntArrayRef strides);
  void integer(const std::string& name, int64_t value);
  void real(const std::string& name, double value);
  void text(const std::string& name, const std::string& value);
  // The trailer, fsync, the rename into place and the folder's fsync; throws mpt::Error naming the path.
  CommittedFile commit();

 private:
  void begin(const std::string& name, RecordKind kind);
  void shape(torch::ScalarType dtype, torch::IntArrayRef sizes);
  void put(const void* data, size_t size);
  void flush();

  std::string path_, temp_;
  int fd_ = -1;
  std::vector<char> buffer_;
  uint64_t written_ = 0;  // record bytes
  uint32_t crc_ = 0, records_ = 0;
};

class CheckpointReader {
 public:
  // Opens a version-2 file and checks its header and trailer; throws mpt::Error naming the path and byte offset.
  explicit CheckpointReader(std::string path);
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  // The next record's header (a tensor's or text's data is read or skipped next); false after the last one, once
  // the CRC of everything read is checked against the trailer's.
  bool next(Record& record);
  // The current tensor record's elements into `target` (as many elements, the same dtype; any device or layout).
  void read_into(const torch::Tensor& target);
  torch::Tensor read_tensor();
  std::string read_text();
  void skip();
  const std::string& path() const { return path_; }
  CommittedFile committed() const { return {file_bytes_, trailer_crc_}; }

 private:
  void get(void* data, size_t size);
  [[noreturn]] void fail(uint64_t offset, const std::string& why) const;

  std::string path_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_{nullptr, std::fclose};
  uint64_t file_bytes_ = 0, end_ = 0, position_ = 0, pending_ = 0;
  uint32_t crc_ = 0, trailer_crc_ = 0, trailer_records_ = 0, records_ = 0;
  bool pending_tensor_ = false;
  Record current_;
};

// The container version of `path` (its first 12 bytes): 1, 2, or 0 when it is not an mpt checkpoint.
uint32_t checkpoint_version(const std::string& path);

// Streams a version-2 file through its records and CRC: "" when sound, else why not (without the path). `committed`
// (may be null) receives what the file is, for an index to compare.
std::string verify_stream(const std::string& path, CommittedFile* committed = nullptr);

// Whether `strides` lay `sizes` out densely, in some order of the dimensions (as contiguous and channels-last do).
bool dense_layout(torch::IntArrayRef sizes, torch::IntArrayRef strides);

}  // namespace mpt::io
