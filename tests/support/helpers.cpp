// Test helpers over popen and the filesystem.
#include "tests/support/helpers.h"

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace mpt::testing {

namespace {
std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}
}  // namespace

CommandResult run_mpt(const std::vector<std::string>& args) {
  std::string command = shell_quote(MPT_BINARY);
  for (const auto& arg : args) command += " " + shell_quote(arg);
  command += " 2>&1";
  CommandResult result{-1, ""};
  std::FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) result.output.append(buffer, n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string scratch_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("mpt-test-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> records;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) records.push_back(nlohmann::json::parse(line));
  return records;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::vector<std::pair<int64_t, double>> metric_series(const std::string& run_dir, const std::string& field) {
  std::vector<std::pair<int64_t, double>> series;
  for (const auto& record : read_jsonl(run_dir + "/metrics.jsonl"))
    if (record.value("kind", "") == "train") series.emplace_back(record["step"].get<int64_t>(), record[field].get<double>());
  return series;
}

std::string read_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::string source_path(const std::string& relative) { return std::string(MPT_SOURCE_DIR) + "/" + relative; }

}  // namespace mpt::testing
