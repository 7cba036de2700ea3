// Test helpers over popen and the filesystem.
#include "tests/support/helpers.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
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

// Runs `command 2>&1` through the shell and captures its output and exit code.
CommandResult run_shell(const std::string& command) {
  CommandResult result{-1, ""};
  std::FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) result.output.append(buffer, n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// Runs `prefix mpt ARGS...` through the shell.
CommandResult run_shell_mpt(const std::string& prefix, const std::vector<std::string>& args) {
  std::string command = prefix + shell_quote(MPT_BINARY);
  for (const auto& arg : args) command += " " + shell_quote(arg);
  return run_shell(command);
}

}  // namespace

CommandResult run_mpt(const std::vector<std::string>& args) { return run_shell_mpt("", args); }

CommandResult run_mpt_with_env(const std::string& env_arguments, const std::vector<std::string>& args) {
  return run_shell_mpt("exec env " + env_arguments + " ", args);
}

CommandResult run_mpt_with_input(const std::string& input_path, const std::vector<std::string>& args) {
  return run_shell_mpt("exec <" + shell_quote(input_path) + " ", args);
}

CommandResult run_mpt_with_file_limit(const std::vector<std::string>& args, int64_t max_file_kib) {
  return run_shell_mpt("ulimit -f " + std::to_string(max_file_kib) + "; exec ", args);
}

int start_mpt(const std::vector<std::string>& args, const std::string& log_path) {
  std::vector<std::string> program = {MPT_BINARY};
  program.insert(program.end(), args.begin(), args.end());
  return start_program(program, log_path);
}

int start_program(const std::vector<std::string>& program, const std::string& log_path) {
  std::vector<std::string> owned = program;
  std::vector<char*> argv;
  for (auto& arg : owned) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  setpgid(pid, pid);  // also here, so that kill_hard works even before the child ran
  return pid;
}

void kill_hard(int pid) {
  kill(-pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
}

int wait_mpt(int pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
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
    if (record.value("kind", "") == "train")
      series.emplace_back(record["step"].get<int64_t>(), record[field].get<double>());
  return series;
}

std::string read_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::string source_path(const std::string& relative) { return std::string(MPT_SOURCE_DIR) + "/" + relative; }

std::string python() { return MPT_PYTHON; }

CommandResult run_python(const std::string& args) { return run_shell(shell_quote(python()) + " " + args); }

std::string python_missing(const std::string& modules) {
  std::string imports;
  for (size_t begin = 0; begin < modules.size();) {
    size_t end = modules.find(' ', begin);
    if (end == std::string::npos) end = modules.size();
    if (end > begin) imports += "import " + modules.substr(begin, end - begin) + "; ";
    begin = end + 1;
  }
  const CommandResult probe = run_python("-c " + shell_quote(imports));
  if (probe.exit_code == 0) return "";
  return python() + " cannot import " + modules + " (scripts/test.sh installs scripts/requirements-oracles.txt)";
}

std::string markup_problem(const std::string& page) {
  static const std::vector<std::string> kVoid = {"meta", "br", "hr", "img", "input", "link"};
  std::vector<std::string> open;
  for (size_t i = 0; i < page.size(); ++i) {
    if (page[i] == '&') {
      const size_t semi = page.find(';', i);
      if (semi == std::string::npos || semi - i > 8) return "stray '&' at offset " + std::to_string(i);
      continue;
    }
    if (page[i] != '<') continue;
    if (page.compare(i, 2, "<!") == 0) {  // doctype or comment
      i = page.find('>', i);
      if (i == std::string::npos) return "unterminated <! at the end";
      continue;
    }
    const size_t close = page.find('>', i);
    if (close == std::string::npos) return "unterminated tag at offset " + std::to_string(i);
    std::string tag = page.substr(i + 1, close - i - 1);
    i = close;
    if (tag.empty() || std::isspace(static_cast<unsigned char>(tag[0])))
      return "stray '<' before offset " + std::to_string(close);
    const bool closing = tag[0] == '/', self_closing = tag.back() == '/';
    const std::string name =
        tag.substr(closing ? 1 : 0, tag.find_first_of(" \t\n/>", closing ? 1 : 0) - (closing ? 1 : 0));
    if (closing) {
      if (open.empty() || open.back() != name)
        return "</" + name + "> at offset " + std::to_string(close) + " closes " +
               (open.empty() ? "nothing" : "<" + open.back() + ">");
      open.pop_back();
    } else if (!self_closing && std::find(kVoid.begin(), kVoid.end(), name) == kVoid.end()) {
      open.push_back(name);
    }
  }
  return open.empty() ? "" : "<" + open.back() + "> is never closed";
}

data::SampleShape image_sample(int64_t channels, int64_t size, int64_t classes) {
  data::SampleShape shape;
  shape.channels = channels;
  shape.height = shape.width = size;
  shape.num_classes = classes;
  return shape;
}

ResumeRecord resume_record(const std::string& run_dir, const std::string& checkpoint) {
  ResumeRecord record;
  for (const auto& event : read_jsonl(run_dir + "/events.jsonl")) {
    if (event["kind"] == "checkpoint_rejected" && event["path"] == checkpoint) record.rejection = event["reason"];
    if (event["kind"] == "resume") record.resumed_at = event["step"].get<int64_t>();
  }
  return record;
}

}  // namespace mpt::testing
