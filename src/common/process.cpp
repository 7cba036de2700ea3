// fork/exec with a log file, a time budget and signal forwarding.
#include "common/process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "common/error.h"
#include "common/files.h"
#include "common/json.h"

namespace mpt::process {

std::string self_executable() {
  std::error_code error;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? "/proc/self/exe" : path.string();
}

ChildResult run_child(const std::vector<std::string>& args, const ChildOptions& options,
                      const volatile int* stop_requested) {
  MPT_CHECK(!args.empty(), "run_child needs a program");
  int log_fd = -1;
  if (!options.log_path.empty()) {
    log_fd = ::open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) throw Error("cannot open " + options.log_path + ": " + std::strerror(errno));
  }
  std::vector<std::string> owned = args;
  std::vector<char*> argv;
  for (auto& arg : owned) argv.push_back(arg.data());
  argv.push_back(nullptr);

  const auto started = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(std::string("cannot start ") + args[0] + ": " + std::strerror(errno));
  if (pid == 0) {                // the child: only async-signal-safe calls until exec
    ::signal(SIGPIPE, SIG_DFL);  // mpt ignores these (main.cpp); an ignored disposition would survive exec
    ::signal(SIGXFSZ, SIG_DFL);
    if (options.own_process_group) ::setpgid(0, 0);
    // A child outliving a killed parent would race the parent's successor for the same run directory.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (log_fd >= 0) ::dup2(log_fd, STDOUT_FILENO), ::dup2(log_fd, STDERR_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  if (log_fd >= 0) ::close(log_fd);

  const pid_t target = options.own_process_group ? -pid : pid;
  ChildResult result;
  bool terminated = false, killed = false, forwarded = false;
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) throw Error(std::string("waiting for ") + args[0] + ": " + std::strerror(errno));
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (stop_requested && *stop_requested && !forwarded) ::kill(target, SIGTERM), forwarded = true;
    if (options.timeout_sec > 0 && elapsed > options.timeout_sec && !terminated) {
      ::kill(target, SIGTERM);
      terminated = result.timed_out = true;
    }
    if (terminated && !killed && elapsed > options.timeout_sec + options.grace_sec)
      ::kill(target, SIGKILL), killed = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

BenchResult run_bench(const std::string& spec_path, const std::vector<std::string>& overrides,
                      const std::vector<std::string>& flags, const std::string& result_path,
                      const ChildOptions& options, const volatile int* stop_requested) {
  std::vector<std::string> args = {self_executable(), "bench", spec_path};
  args.insert(args.end(), overrides.begin(), overrides.end());
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), {"--json-out", result_path});
  BenchResult bench;
  bench.child = run_child(args, options, stop_requested);
  std::error_code error;
  if (bench.child.exit_code == 0 && std::filesystem::is_regular_file(result_path, error)) {
    nlohmann::json json = parse_json(read_file(result_path));
    if (json.is_object()) bench.result = std::move(json);
  }
  std::filesystem::remove(result_path, error);
  return bench;
}

}  // namespace mpt::process
