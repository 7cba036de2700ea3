// IDX reading: zlib's gz* interface reads gzip'd and plain files alike; parse_idx checks every header field.
#include "data/idx.h"

#include <zlib.h>

#include <cstdio>
#include <sstream>

#include "common/error.h"

namespace mpt::data {
namespace {

std::string hex_bytes(const std::vector<uint8_t>& bytes, size_t offset, size_t count) {
  std::ostringstream out;
  for (size_t i = offset; i < offset + count && i < bytes.size(); ++i) {
    char buffer[4];
    std::snprintf(buffer, sizeof(buffer), "%02x", bytes[i]);
    out << (i > offset ? " " : "") << buffer;
  }
  return out.str();
}

}  // namespace

std::vector<uint8_t> read_maybe_gzipped(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (!file) throw Error(path + ": cannot open (does the file exist and is it readable?)");
  std::vector<uint8_t> content;
  std::vector<uint8_t> chunk(1 << 20);
  while (true) {
    int n = gzread(file, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) break;
    content.insert(content.end(), chunk.begin(), chunk.begin() + n);
    if (n == 0) break;
  }
  int code = Z_OK;
  const char* message = gzerror(file, &code);
  std::string reason = message ? message : "";
  gzclose(file);
  if (code != Z_OK && code != Z_STREAM_END)
    throw Error(path + ": corrupt or truncated gzip stream after " + std::to_string(content.size()) +
                " decompressed bytes: " + reason);
  return content;
}

IdxArray parse_idx(const std::vector<uint8_t>& bytes, const std::string& path, int expected_rank) {
  const std::string where = path + ": ";
  if (bytes.size() < 4)
    throw Error(where + "byte 0: expected a 4-byte IDX magic, the file has only " + std::to_string(bytes.size()) +
                " bytes");
  if (bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08 || bytes[3] != expected_rank) {
    throw Error(where + "byte 0: expected IDX magic 00 00 08 0" + std::to_string(expected_rank) + " (unsigned bytes, " +
                std::to_string(expected_rank) + " dimensions), found " + hex_bytes(bytes, 0, 4));
  }
  const size_t header = 4 + 4 * static_cast<size_t>(expected_rank);
  if (bytes.size() < header)
    throw Error(where + "byte " + std::to_string(bytes.size()) + ": truncated header; expected " +
                std::to_string(header) + " bytes of magic and dimensions");
  IdxArray array;
  size_t count = 1;
  for (int d = 0; d < expected_rank; ++d) {
    const size_t at = 4 + 4 * d;
    uint32_t dim = (uint32_t(bytes[at]) << 24) | (uint32_t(bytes[at + 1]) << 16) | (uint32_t(bytes[at + 2]) << 8) |
                   uint32_t(bytes[at + 3]);
    if (dim == 0) throw Error(where + "byte " + std::to_string(at) + ": dimension " + std::to_string(d) + " is 0");
    array.dims.push_back(dim);
    if (__builtin_mul_overflow(count, static_cast<size_t>(dim), &count))
      throw Error(where + "byte " + std::to_string(at) + ": the dimensions multiply past 2^64 elements");
  }
  if (bytes.size() - header != count) {
    throw Error(where + "byte " + std::to_string(bytes.size()) + ": the header promises " + std::to_string(count) +
                " values after byte " + std::to_string(header) + ", the data holds " +
                std::to_string(bytes.size() - header) +
                (bytes.size() - header < count ? " (truncated)" : " (trailing bytes)"));
  }
  array.values.assign(bytes.begin() + header, bytes.end());
  return array;
}

IdxArray read_idx(const std::string& path, int expected_rank) {
  return parse_idx(read_maybe_gzipped(path), path, expected_rank);
}

}  // namespace mpt::data
