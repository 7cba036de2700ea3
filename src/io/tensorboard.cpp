// TensorBoard scalars: protobuf wire format by hand (varint, fixed64, fixed32, length-delimited).
#include "io/tensorboard.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/error.h"

namespace mpt::io {
namespace {

std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // Castagnoli, reflected
    table[i] = c;
  }
  return table;
}

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

template <typename T>
void put_fixed(std::string& out, T value) {  // x86-64 is little-endian, as the wire format is
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

void put_bytes_field(std::string& out, uint8_t key, const std::string& bytes) {
  out.push_back(static_cast<char>(key));
  put_varint(out, bytes.size());
  out += bytes;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Event{wall_time=1, step=2}: what every event of a step starts with.
std::string event_at(double wall_time, int64_t step) {
  std::string event;
  event.push_back(0x09);
  put_fixed<double>(event, wall_time);
  event.push_back(0x10);
  put_varint(event, static_cast<uint64_t>(step));
  return event;
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  static const std::array<uint32_t, 256> table = make_crc32c_table();
  uint32_t crc = 0xFFFFFFFFu;
  const auto* bytes = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ bytes[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string encode_scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  std::string summary_value;  // Summary.Value{tag=1, simple_value=2}
  put_bytes_field(summary_value, 0x0A, tag);
  summary_value.push_back(0x15);
  put_fixed<float>(summary_value, value);
  std::string summary;  // Summary{value=1}
  put_bytes_field(summary, 0x0A, summary_value);
  std::string event = event_at(wall_time, step);  // ..., summary=5
  put_bytes_field(event, 0x2A, summary);
  return event;
}

std::string encode_file_version_event(double wall_time) {
  std::string event;  // Event{wall_time=1, file_version=3}
  event.push_back(0x09);
  put_fixed<double>(event, wall_time);
  put_bytes_field(event, 0x1A, "brain.Event:2");
  return event;
}

std::string encode_session_start_event(double wall_time, int64_t step) {
  std::string session_log;  // SessionLog{status=1: START}
  session_log.push_back(0x08);
  put_varint(session_log, 1);
  std::string event = event_at(wall_time, step);  // ..., session_log=7
  put_bytes_field(event, 0x3A, session_log);
  return event;
}

std::string frame_record(const std::string& data) {
  std::string record;
  const uint64_t length = data.size();
  put_fixed<uint64_t>(record, length);
  put_fixed<uint32_t>(record, masked_crc32c(&length, sizeof(length)));
  record += data;
  put_fixed<uint32_t>(record, masked_crc32c(data.data(), data.size()));
  return record;
}

TensorBoardWriter::TensorBoardWriter(const std::string& folder) {
  if (folder.empty()) return;
  static std::atomic<int> counter{0};
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  const double now = now_seconds();
  char name[512];
  std::snprintf(name, sizeof(name), "/events.out.tfevents.%010lld.%s.%d.%03d", static_cast<long long>(now), host,
                static_cast<int>(getpid()), counter++);
  path_ = folder + name;
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_) throw Error(path_ + ": cannot create the TensorBoard event file: " + std::strerror(errno));
  write_record(encode_file_version_event(now));
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::scalar(const std::string& tag, int64_t step, double value) {
  write_record(encode_scalar_event(now_seconds(), step, tag, static_cast<float>(value)));
}

void TensorBoardWriter::restart_at(int64_t step) { write_record(encode_session_start_event(now_seconds(), step)); }

void TensorBoardWriter::write_record(const std::string& data) {
  if (!file_) return;
  const std::string record = frame_record(data);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() || std::fflush(file_) != 0)
    throw Error(path_ + ": writing a TensorBoard record failed: " + std::strerror(errno));
}

}  // namespace mpt::io
