// IDX files (the MNIST family's format), plain or gzip'd, read whole into memory with strict checks:
// a bad magic, a wrong rank, a truncated or over-long file is an mpt::Error naming the file and byte offset.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mpt::data {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> values;  // row-major, unsigned bytes (the only element type the datasets use)
};

// Reads an unsigned-byte IDX array of `expected_rank` dimensions. Offsets in errors count bytes of the
// decompressed stream (the file's own bytes when it is not gzip'd).
IdxArray read_idx(const std::string& path, int expected_rank);

// Parses IDX bytes already in memory; `path` only names the source in errors.
IdxArray parse_idx(const std::vector<uint8_t>& bytes, const std::string& path, int expected_rank);

// The whole decompressed content of a plain or gzip'd file.
std::vector<uint8_t> read_maybe_gzipped(const std::string& path);

}  // namespace mpt::data
