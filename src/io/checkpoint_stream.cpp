// See checkpoint_stream.h. Every length a file declares is checked against what the file holds before anything is
// allocated for it: a CRC-valid file can still declare more than it has.
#include "io/checkpoint_stream.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/error.h"

namespace mpt::io {
namespace {

constexpr char kMagic[8] = {'M', 'P', 'T', 'C', 'K', 'P', 'T', '\n'};
constexpr char kTrailer[8] = {'M', 'P', 'T', 'D', 'O', 'N', 'E', '\n'};
constexpr uint64_t kHeaderBytes = 16, kTrailerBytes = 24;
constexpr size_t kChunk = size_t{1} << 20;
constexpr uint32_t kMaxName = 4096;
constexpr uint8_t kMaxDims = 16;
constexpr uint64_t kMaxText = uint64_t{16} << 20;

// The dtypes a checkpoint holds, by a code of the format's own (LibTorch's enum is not a file format).
constexpr std::array<torch::ScalarType, 12> kDtypes = {
    torch::kFloat, torch::kDouble, torch::kHalf, torch::kBFloat16, torch::kLong,          torch::kInt,
    torch::kShort, torch::kChar,   torch::kByte, torch::kBool,     torch::kFloat8_e4m3fn, torch::kFloat8_e5m2};

uint8_t dtype_code(torch::ScalarType dtype) {
  const auto found = std::find(kDtypes.begin(), kDtypes.end(), dtype);
  if (found == kDtypes.end()) throw Error(std::string("a checkpoint cannot hold a tensor of ") + c10::toString(dtype));
  return static_cast<uint8_t>(found - kDtypes.begin() + 1);
}

uint32_t crc_update(uint32_t crc, const void* data, size_t size) {
  const auto* bytes = static_cast<const Bytef*>(data);
  for (size_t done = 0; done < size;) {
    const size_t n = std::min(size - done, kChunk);
    crc = static_cast<uint32_t>(crc32(crc, bytes + done, static_cast<uInt>(n)));
    done += n;
  }
  return crc;
}

std::string os_reason() { return std::strerror(errno); }

struct ContainerError : Error {
  ContainerError(const std::string& path, std::string why_) : Error(path + ": " + why_), why(std::move(why_)) {}
  std::string why;
};

}  // namespace

CheckpointWriter::CheckpointWriter(std::string path)
    : path_(std::move(path)), temp_(path_ + ".tmp." + std::to_string(::getpid())) {
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(path_ + ": cannot create " + temp_ + ": " + os_reason());
  buffer_.reserve(kChunk);
  buffer_.insert(buffer_.end(), kMagic, kMagic + sizeof(kMagic));
  const uint32_t header[2] = {kStreamVersion, 0};
  buffer_.insert(buffer_.end(), reinterpret_cast<const char*>(header), reinterpret_cast<const char*>(header) + 8);
}

CheckpointWriter::~CheckpointWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(temp_.c_str());
}

void CheckpointWriter::flush() {
  for (size_t done = 0; done < buffer_.size();) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw Error(path_ + ": writing the checkpoint failed (" + (n < 0 ? os_reason() : "short write") +
                  "); the previous checkpoint is intact");
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
}

void CheckpointWriter::put(const void* data, size_t size) {
  crc_ = crc_update(crc_, data, size);
  written_ += size;
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const size_t n = std::min(size, kChunk - buffer_.size());
    buffer_.insert(buffer_.end(), bytes, bytes + n);
    bytes += n, size -= n;
    if (buffer_.size() == kChunk) flush();
  }
}

void CheckpointWriter::begin(const std::string& name, RecordKind kind) {
  if (name.size() > kMaxName) throw Error(path_ + ": record name longer than " + std::to_string(kMaxName) + " bytes");
  const auto length = static_cast<uint32_t>(name.size());
  put(&length, 4);
  put(name.data(), name.size());
  put(&kind, 1);
  ++records_;
}

void CheckpointWriter::shape(torch::ScalarType dtype, torch::IntArrayRef sizes) {
  const uint8_t code = dtype_code(dtype);
  const auto dims = static_cast<uint8_t>(sizes.size());
  put(&code, 1);
  put(&dims, 1);
  for (int64_t size : sizes) put(&size, 8);
}

void CheckpointWriter::tensor(const std::string& name, const torch::Tensor& value) {
  const torch::Tensor host = value.detach().to(torch::kCPU).contiguous();  // no copy for a dense CPU tensor
  begin(name, RecordKind::kTensor);
  shape(host.scalar_type(), host.sizes());
  const uint64_t bytes = host.numel() * host.element_size();
  put(&bytes, 8);
  if (bytes > 0) put(host.data_ptr(), bytes);
}

void CheckpointWriter::pieces(const std::string& name, torch::ScalarType dtype, torch::IntArrayRef sizes,
                              torch::IntArrayRef strides) {
  begin(name, RecordKind::kPieces);
  shape(dtype, sizes);
  for (int64_t stride : strides) put(&stride, 8);
}

void CheckpointWriter::integer(const std::string& name, int64_t value) {
  begin(name, RecordKind::kInteger);
  put(&value, 8);
}

void CheckpointWriter::real(const std::string& name, double value) {
  begin(name, RecordKind::kReal);
  put(&value, 8);
}

void CheckpointWriter::text(const std::string& name, const std::string& value) {
  begin(name, RecordKind::kText);
  const uint64_t bytes = value.size();
  put(&bytes, 8);
  put(value.data(), value.size());
}

CommittedFile CheckpointWriter::commit() {
  buffer_.insert(buffer_.end(), kTrailer, kTrailer + sizeof(kTrailer));
  const char* tail[] = {reinterpret_cast<const char*>(&written_), reinterpret_cast<const char*>(&crc_),
                        reinterpret_cast<const char*>(&records_)};
  buffer_.insert(buffer_.end(), tail[0], tail[0] + 8);
  buffer_.insert(buffer_.end(), tail[1], tail[1] + 4);
  buffer_.insert(buffer_.end(), tail[2], tail[2] + 4);
  flush();
  if (::fsync(fd_) != 0 || ::close(fd_) != 0) {
    fd_ = -1;
    const std::string reason = os_reason();
    ::unlink(temp_.c_str());
    throw Error(path_ + ": flushing the checkpoint to disk failed (" + reason + "); the previous one is intact");
  }
  fd_ = -1;
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    const std::string reason = os_reason();
    ::unlink(temp_.c_str());
    throw Error(path_ + ": cannot move the new checkpoint into place (" + reason + ")");
  }
  if (const int folder = ::open(std::filesystem::path(path_).parent_path().c_str(), O_RDONLY | O_DIRECTORY);
      folder >= 0) {
    ::fsync(folder);
    ::close(folder);
  }
  return {kHeaderBytes + written_ + kTrailerBytes, crc_};
}

CheckpointReader::CheckpointReader(std::string path) : path_(std::move(path)) {
  file_.reset(std::fopen(path_.c_str(), "rb"));
  if (!file_) throw ContainerError(path_, "cannot open: " + os_reason());
  std::setvbuf(file_.get(), nullptr, _IOFBF, kChunk);
  std::error_code error;
  file_bytes_ = std::filesystem::file_size(path_, error);
  if (error || file_bytes_ < kHeaderBytes + kTrailerBytes)
    fail(0, "only " + std::to_string(file_bytes_) + " bytes; a checkpoint has at least 40 (truncated?)");
  char header[kHeaderBytes];
  if (std::fread(header, 1, kHeaderBytes, file_.get()) != kHeaderBytes) fail(0, "cannot read the header");
  if (std::memcmp(header, kMagic, 8) != 0) fail(0, "not an mpt checkpoint (bad magic)");
  uint32_t version = 0;
  std::memcpy(&version, header + 8, 4);
  if (version != kStreamVersion) fail(8, "format version " + std::to_string(version) + ", expected 2");
  char trailer[kTrailerBytes];
  if (fseeko(file_.get(), static_cast<off_t>(file_bytes_ - kTrailerBytes), SEEK_SET) != 0 ||
      std::fread(trailer, 1, kTrailerBytes, file_.get()) != kTrailerBytes || std::memcmp(trailer, kTrailer, 8) != 0)
    fail(file_bytes_ - kTrailerBytes, "missing the completion trailer (a write that never finished)");
  uint64_t records_bytes = 0;
  std::memcpy(&records_bytes, trailer + 8, 8);
  std::memcpy(&trailer_crc_, trailer + 16, 4);
  std::memcpy(&trailer_records_, trailer + 20, 4);
  if (records_bytes != file_bytes_ - kHeaderBytes - kTrailerBytes)
    fail(file_bytes_ - kTrailerBytes + 8, "the trailer promises " + std::to_string(records_bytes) +
                                              " bytes of records, the file holds " +
                                              std::to_string(file_bytes_ - kHeaderBytes - kTrailerBytes));
  fseeko(file_.get(), static_cast<off_t>(kHeaderBytes), SEEK_SET);
  position_ = kHeaderBytes;
  end_ = kHeaderBytes + records_bytes;
}

void CheckpointReader::fail(uint64_t offset, const std::string& why) const {
  throw ContainerError(path_, "byte " + std::to_string(offset) + ": " + why);
}

void CheckpointReader::get(void* data, size_t size) {
  if (size > end_ - position_) fail(position_, "a record runs past the end of the records (truncated or overwritten)");
  if (size > 0 && std::fread(data, 1, size, file_.get()) != size) fail(position_, "cannot read: " + os_reason());
  crc_ = crc_update(crc_, data, size);
  position_ += size;
}

bool CheckpointReader::next(Record& record) {
  if (pending_ > 0) skip();
  if (position_ == end_) {
    if (crc_ != trailer_crc_) fail(kHeaderBytes, "CRC-32 mismatch over the records (the file is corrupt)");
    if (records_ != trailer_records_)
      fail(end_, std::to_string(records_) + " records, the trailer counts " + std::to_string(trailer_records_));
    return false;
  }
  record = Record();
  record.offset = position_;
  uint32_t length = 0;
  get(&length, 4);
  if (length > kMaxName) fail(record.offset, "a record name of " + std::to_string(length) + " bytes");
  record.name.resize(length);
  get(record.name.data(), length);
  uint8_t kind = 0;
  get(&kind, 1);
  ++records_;
  record.kind = static_cast<RecordKind>(kind);
  switch (record.kind) {
    case RecordKind::kInteger: get(&record.integer, 8); break;
    case RecordKind::kReal: get(&record.real, 8); break;
    case RecordKind::kText:
      get(&record.bytes, 8);
      if (record.bytes > kMaxText || record.bytes > end_ - position_)
        fail(record.offset, "text record '" + record.name + "' of " + std::to_string(record.bytes) + " bytes");
      break;
    case RecordKind::kTensor:
    case RecordKind::kPieces: {
      uint8_t code = 0, dims = 0;
      get(&code, 1);
      get(&dims, 1);
      if (code == 0 || code > kDtypes.size()) fail(record.offset, "tensor '" + record.name + "' has an unknown dtype");
      if (dims > kMaxDims) fail(record.offset, "tensor '" + record.name + "' has " + std::to_string(dims) + " dims");
      record.dtype = kDtypes[code - 1];
      record.sizes.resize(dims);
      get(record.sizes.data(), 8 * dims);
      uint64_t elements = 1;
      for (int64_t size : record.sizes) {
        if (size < 0 || (size > 0 && elements > (uint64_t{1} << 62) / static_cast<uint64_t>(size)))
          fail(record.offset, "tensor '" + record.name + "' has an impossible shape");
        elements *= static_cast<uint64_t>(size);
      }
      if (record.kind == RecordKind::kPieces) {
        record.strides.resize(dims);
        get(record.strides.data(), 8 * dims);
        break;
      }
      get(&record.bytes, 8);
      if (record.bytes != elements * c10::elementSize(record.dtype))
        fail(record.offset, "tensor '" + record.name + "' declares " + std::to_string(record.bytes) + " bytes for " +
                                std::to_string(elements) + " elements");
      if (record.bytes > end_ - position_)
        fail(record.offset, "tensor '" + record.name + "' runs past the end of the records");
      pending_tensor_ = true;
      break;
    }
    default: fail(record.offset, "record '" + record.name + "' of unknown kind " + std::to_string(kind));
  }
  pending_ = record.bytes;
  current_ = record;
  return true;
}

void CheckpointReader::read_into(const torch::Tensor& target) {
  if (!pending_tensor_) fail(position_, "no tensor to read here");
  const int64_t elements = static_cast<int64_t>(pending_ / c10::elementSize(current_.dtype));
  if (target.numel() != elements || target.scalar_type() != current_.dtype)
    fail(current_.offset, "tensor '" + current_.name + "' holds " + std::to_string(elements) + " " +
                              c10::toString(current_.dtype) + " elements; expected " + std::to_string(target.numel()) +
                              " " + c10::toString(target.scalar_type()));
  const bool direct = target.device().is_cpu() && target.is_contiguous();
  const torch::Tensor into = direct ? target : torch::empty(current_.sizes, torch::TensorOptions(current_.dtype));
  if (pending_ > 0) get(into.data_ptr(), pending_);
  if (!direct) {
    torch::NoGradGuard no_grad;
    target.copy_(into.reshape(target.sizes()));
  }
  pending_ = 0;
  pending_tensor_ = false;
}

torch::Tensor CheckpointReader::read_tensor() {
  torch::Tensor tensor = torch::empty(current_.sizes, torch::TensorOptions(current_.dtype));
  read_into(tensor);
  return tensor;
}

std::string CheckpointReader::read_text() {
  if (current_.kind != RecordKind::kText) fail(current_.offset, "record '" + current_.name + "' is not text");
  std::string text(pending_, '\0');
  get(text.data(), text.size());
  pending_ = 0;
  return text;
}

void CheckpointReader::skip() {
  std::vector<char> chunk(std::min<uint64_t>(pending_, kChunk));
  while (pending_ > 0) {
    const size_t n = std::min<uint64_t>(pending_, chunk.size());
    get(chunk.data(), n);
    pending_ -= n;
  }
  pending_tensor_ = false;
}

uint32_t checkpoint_version(const std::string& path) {
  char header[12] = {0};
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) return 0;
  const size_t n = std::fread(header, 1, sizeof(header), file);
  std::fclose(file);
  if (n < sizeof(header) || std::memcmp(header, kMagic, 8) != 0) return 0;
  uint32_t version = 0;
  std::memcpy(&version, header + 8, 4);
  return version;
}

std::string verify_stream(const std::string& path, CommittedFile* committed) {
  try {
    CheckpointReader reader(path);
    for (Record record; reader.next(record);) {
    }
    if (committed) *committed = reader.committed();
    return "";
  } catch (const ContainerError& e) {
    return e.why;
  }
}

bool dense_layout(torch::IntArrayRef sizes, torch::IntArrayRef strides) {
  if (sizes.size() != strides.size()) return false;
  std::vector<size_t> order(sizes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return strides[a] < strides[b]; });
  int64_t expected = 1;
  for (size_t dim : order) {
    if (sizes[dim] > 1 && strides[dim] != expected) return false;
    expected *= std::max<int64_t>(sizes[dim], 1);
  }
  return true;
}

}  // namespace mpt::io
