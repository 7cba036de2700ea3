// Durable file writes: atomic replacement (temp file, fsync, rename, fsync of the folder) so a crash or a
// full disk never leaves a half-written file where a good one was; and line-flushed JSONL appends.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace mpt::io {

// Replaces `path` with `bytes` atomically; throws mpt::Error (naming the path and the OS reason) on failure,
// leaving any previous file untouched.
void write_file_atomically(const std::string& path, const std::string& bytes);

std::string read_file(const std::string& path);

// Every JSON object of a JSONL file (metrics, events, history). A final line without its newline is a record
// torn by a kill mid-write and is dropped; any other malformed line throws mpt::Error naming file and line.
std::vector<nlohmann::json> read_jsonl_records(const std::string& path);

// One JSON object per line, flushed per line so `tail -f` and a crash both see whole lines.
class JsonlWriter {
 public:
  explicit JsonlWriter(const std::string& path);  // "": writes nothing (ranks other than 0)
  ~JsonlWriter();
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;

  void write(const nlohmann::json& record);

 private:
  std::string path_;
  std::FILE* file_;
};

}  // namespace mpt::io
