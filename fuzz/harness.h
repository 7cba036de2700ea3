// Shared by the fuzz harnesses: a per-process scratch file for parsers that read a path, and the rule that an
// mpt::Error (a clear refusal) is the only acceptable way to fail. Anything else escaping a parser, a crash,
// a hang or a sanitizer report is a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "common/error.h"

namespace mpt::fuzz {

// FUZZ_SCRATCH/fuzz-<pid>-NAME holding `data`; rewritten for every input.
inline std::string scratch_file(const uint8_t* data, size_t size, const std::string& name) {
  static const std::string folder = [] {
    const char* env = std::getenv("FUZZ_SCRATCH");
    return std::string(env && *env ? env : "/tmp");
  }();
  const std::string path = folder + "/fuzz-" + std::to_string(::getpid()) + "-" + name;
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) std::abort();
  if (size > 0) std::fwrite(data, 1, size, file);
  std::fclose(file);
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
