// Durable writes with plain POSIX calls: every failure names the file and errno's reason.
#include "common/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/json.h"

namespace mpt {
namespace {

std::string os_reason() { return std::strerror(errno); }

void fsync_folder(const std::string& folder) {
  int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;  // best effort: some filesystems refuse directory fds
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& bytes, unsigned permissions) {
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, static_cast<mode_t>(permissions));
  if (fd < 0) throw Error(path + ": cannot create " + temp + ": " + os_reason());
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string reason = n < 0 ? os_reason() : "short write";
      ::close(fd);
      ::unlink(temp.c_str());
      throw Error(path + ": writing failed after " + std::to_string(written) + " of " + std::to_string(bytes.size()) +
                  " bytes (" + reason + "); the previous file is intact");
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    std::string reason = os_reason();
    ::unlink(temp.c_str());
    throw Error(path + ": flushing to disk failed (" + reason + "); the previous file is intact");
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    std::string reason = os_reason();
    ::unlink(temp.c_str());
    throw Error(path + ": cannot move the new file into place (" + reason + ")");
  }
  fsync_folder(std::filesystem::path(path).parent_path().string());
}

void require_regular_file(const std::string& path, const std::string& what) {
  // A directory opens and reads as empty, a device or pipe may never end: refuse both before reading.
  std::error_code error;
  const auto type = std::filesystem::status(path, error).type();
  if (type == std::filesystem::file_type::directory) throw UsageError(path + ": is a directory; expected " + what);
  if (type != std::filesystem::file_type::regular && type != std::filesystem::file_type::not_found)
    throw UsageError(path + ": is not a regular file (a device, pipe or socket); expected " + what);
}

std::string path_problem(const std::string& path, PathKind kind) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (status.type() == fs::file_type::not_found || (error && error == std::errc::no_such_file_or_directory)) {
    if (kind == PathKind::kFile) return "no such file";
    return kind == PathKind::kFolder ? "no such folder" : "no such file or folder";
  }
  if (error) return error.message();
  if (kind == PathKind::kFile && !fs::is_regular_file(status))
    return fs::is_directory(status) ? "a folder, not a file" : "not a regular file (a device, pipe or socket)";
  if (kind == PathKind::kFolder && !fs::is_directory(status)) return "a file, not a folder";
  return "";
}

std::string read_file(const std::string& path, uintmax_t max_bytes) {
  require_regular_file(path);
  std::error_code error;
  if (const uintmax_t size = std::filesystem::file_size(path, error); !error && size > max_bytes)
    throw Error(path + ": " + std::to_string(size) + " bytes; expected at most " + std::to_string(max_bytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open for reading");
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

JsonlWriter::JsonlWriter(const std::string& path)
    : path_(path), file_(path.empty() ? nullptr : std::fopen(path.c_str(), "a")) {
  if (!path.empty() && !file_) throw Error(path + ": cannot open for appending: " + os_reason());
}

JsonlWriter::~JsonlWriter() {
  if (file_) std::fclose(file_);
}

void JsonlWriter::write(nlohmann::json record) {
  if (!file_) return;
  if (!record.contains("time"))
    record["time"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    throw Error(path_ + ": appending a record failed: " + os_reason());
}

void JsonlWriter::cut(uint64_t begin, uint64_t end) {
  if (!file_ || begin >= end) return;
  const std::string text = read_file(path_);
  if (end > text.size())
    throw Error(path_ + ": cannot cut bytes " + std::to_string(begin) + ".." + std::to_string(end) + " of a " +
                std::to_string(text.size()) + "-byte file");
  std::fclose(file_);
  file_ = nullptr;
  write_file_atomically(path_, text.substr(0, begin) + text.substr(end));
  file_ = std::fopen(path_.c_str(), "a");
  if (!file_) throw Error(path_ + ": cannot open for appending: " + os_reason());
}

std::vector<nlohmann::json> read_jsonl_records(const std::string& path) {
  const std::string text = read_file(path);
  std::vector<nlohmann::json> records;
  size_t begin = 0;
  for (int64_t number = 1; begin < text.size(); ++number) {
    const size_t newline = text.find('\n', begin);
    const bool torn_tail = newline == std::string::npos;
    const std::string line = text.substr(begin, torn_tail ? std::string::npos : newline - begin);
    begin = torn_tail ? text.size() : newline + 1;
    if (line.empty()) continue;
    nlohmann::json record = parse_json(line);
    if (record.is_discarded() || !record.is_object()) {
      if (torn_tail) break;
      throw Error(path + ":" + std::to_string(number) +
                  ": not a JSON object (fix or remove that line): " + line.substr(0, 80));
    }
    records.push_back(std::move(record));
  }
  return records;
}

int64_t cut_torn_tail(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return 0;
  const std::string text = read_file(path);
  if (text.empty() || text.back() == '\n') return 0;
  const size_t keep = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
  if (::truncate(path.c_str(), static_cast<off_t>(keep)) != 0)
    throw Error(path + ": cannot cut its partial last line: " + os_reason());
  return static_cast<int64_t>(text.size() - keep);
}

}  // namespace mpt
