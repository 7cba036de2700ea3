// Shared by the fuzz harnesses: per-process scratch files and folders for parsers that read a path, and the rule
// that an mpt::Error (a clear refusal) is the only acceptable way to fail. Anything else escaping a parser, a crash,
// a hang or a sanitizer report is a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/error.h"

namespace mpt::fuzz {

// Writes `data` to `path`; a scratch file that cannot be written is the harness's fault, so it aborts.
inline void write_bytes(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) std::abort();
  if (size > 0) std::fwrite(data, 1, size, file);
  std::fclose(file);
}

// FUZZ_SCRATCH/fuzz-<pid>-NAME: a file, or (made once) a folder for loaders that read a data root.
inline std::string scratch_path(const std::string& name) {
  static const std::string folder = [] {
    const char* env = std::getenv("FUZZ_SCRATCH");
    return std::string(env && *env ? env : "/tmp");
  }();
  return folder + "/fuzz-" + std::to_string(::getpid()) + "-" + name;
}

inline std::string scratch_folder(const std::string& name) {
  const std::string path = scratch_path(name);
  std::filesystem::create_directories(path);
  return path;
}

// FOLDER/vocab.txt: the special tokens and a few pieces, for the loaders that read data.vocab.
inline std::string write_small_vocabulary(const std::string& folder) {
  static const std::string kTokens = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n##s\na\n##b\n";
  const std::string path = folder + "/vocab.txt";
  write_bytes(path, reinterpret_cast<const uint8_t*>(kTokens.data()), kTokens.size());
  return path;
}

// FUZZ_SCRATCH/fuzz-<pid>-NAME holding `data`; rewritten for every input.
inline std::string scratch_file(const uint8_t* data, size_t size, const std::string& name) {
  const std::string path = scratch_path(name);
  write_bytes(path, data, size);
  return path;
}

template <typename Body>
void refusals_only(Body&& body) {
  try {
    body();
  } catch (const mpt::Error&) {
  }
}

}  // namespace mpt::fuzz
