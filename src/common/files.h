// Durable file writes: atomic replacement (temp file, fsync, rename, fsync of the folder) so a crash or a
// full disk never leaves a half-written file where a good one was; and line-flushed JSONL appends.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace mpt {

// Replaces `path` with `bytes` atomically; throws mpt::Error (naming the path and the OS reason) on failure,
// leaving any previous file untouched. `permissions` 0600 keeps a file that holds credentials to its owner.
void write_file_atomically(const std::string& path, const std::string& bytes, unsigned permissions = 0644);

// The whole file; one larger than `max_bytes` is refused before it is read (an Error naming it and its size).
std::string read_file(const std::string& path, uintmax_t max_bytes = UINTMAX_MAX);

// Throws UsageError naming `path` when it is a directory, a device, a pipe or a socket, saying it expected
// `what` ("a file", "a spec file (SPEC.yaml)"); a missing file is left to the reader's own message.
void require_regular_file(const std::string& path, const std::string& what = "a file");

enum class PathKind { kFile, kFolder, kAny };

// Why `path` is not a `kind` ("no such file", "a folder, not a file", "File name too long"), or "" when it is.
// Never throws: a path the system refuses is the user's mistake to name, not an exception to escape.
std::string path_problem(const std::string& path, PathKind kind);

// Every JSON object of a JSONL file (metrics, events, history). A final line without its newline is a record
// torn by a kill mid-write and is dropped; any other malformed line throws mpt::Error naming file and line.
std::vector<nlohmann::json> read_jsonl_records(const std::string& path);

// Cuts a JSONL file back to its last complete line (what a crash mid-append leaves), so that the next record is
// not glued to the partial one; returns the bytes cut (0 when the file ends in a newline or does not exist).
int64_t cut_torn_tail(const std::string& path);

// One JSON object per line, flushed per line so `tail -f` and a crash both see whole lines; each record gets the
// wall-clock "time" it was written (seconds since the epoch) unless it has one.
class JsonlWriter {
 public:
  explicit JsonlWriter(const std::string& path);  // "": writes nothing (ranks other than 0)
  ~JsonlWriter();
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;

  void write(nlohmann::json record);
  // Removes the bytes [begin, end) of the file, keeping what follows them (a resume rewinding the records an earlier
  // invocation wrote past its checkpoint); the file is replaced atomically, then appended to as before.
  void cut(uint64_t begin, uint64_t end);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_;
};

}  // namespace mpt
