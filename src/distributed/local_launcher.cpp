// Local worker launcher (see local_launcher.h).
#include "distributed/local_launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "common/error.h"

extern char** environ;

namespace mpt::distributed {
namespace {

volatile std::sig_atomic_t g_forward_signal = 0;
volatile std::sig_atomic_t g_signals = 0;

void remember_signal(int signal) {
  g_forward_signal = signal;
  g_signals = g_signals + 1;
}

// A port the kernel considers free right now. Another process could take it before rank 0 binds it; the
// window is milliseconds, and rank 0 then fails with a clear rendezvous error rather than hanging.
int free_local_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error(std::string("--nproc: cannot open a socket to find a free port: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    throw Error(std::string("--nproc: cannot bind a loopback port: ") + std::strerror(errno));
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  return fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
}

int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

namespace {

// Each rank's environment: the launcher's own without any launch variable, then the rank's.
std::vector<std::vector<std::string>> rank_environments(int nproc, int port) {
  const std::vector<std::string> ours = {"RANK",        "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                         "MASTER_ADDR", "MASTER_PORT"};
  std::vector<std::string> inherited;
  for (char** entry = environ; *entry; ++entry) {
    const std::string variable = *entry;
    if (std::find(ours.begin(), ours.end(), variable.substr(0, variable.find('='))) == ours.end())
      inherited.push_back(variable);
  }
  std::vector<std::vector<std::string>> environments(static_cast<size_t>(nproc), inherited);
  for (int rank = 0; rank < nproc; ++rank) {
    auto& environment = environments[static_cast<size_t>(rank)];
    for (const auto& [name, value] : std::vector<std::pair<std::string, int>>{{"RANK", rank},
                                                                              {"WORLD_SIZE", nproc},
                                                                              {"LOCAL_RANK", rank},
                                                                              {"LOCAL_WORLD_SIZE", nproc},
                                                                              {"MASTER_PORT", port}})
      environment.push_back(name + "=" + std::to_string(value));
    environment.push_back("MASTER_ADDR=127.0.0.1");
  }
  return environments;
}

std::vector<char*> pointers_to(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (auto& text : strings) pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

// Forks and execs every rank (argv and environments are built before fork: after it, only async-signal-safe calls).
std::vector<pid_t> start_ranks(std::vector<std::string> args, std::vector<std::vector<std::string>> environments) {
  std::vector<char*> argv = pointers_to(args);
  std::vector<std::vector<char*>> envps;
  for (auto& environment : environments) envps.push_back(pointers_to(environment));
  std::vector<pid_t> pids(environments.size(), -1);
  for (size_t rank = 0; rank < pids.size(); ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      for (pid_t started : pids)
        if (started > 0) ::kill(started, SIGTERM);
      throw Error(fmt::format("--nproc: cannot start rank {}: {}", rank, std::strerror(errno)));
    }
    if (pid == 0) {
      // Its own process group: a terminal's Ctrl-C reaches only the launcher, which forwards it once. Were the
      // ranks in the terminal's group, the forwarded copy would be their second SIGINT, which stops at once.
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // a launcher killed outright takes its ranks with it
      ::execve(argv[0], argv.data(), envps[rank].data());
      ::_exit(127);
    }
    pids[rank] = pid;
  }
  return pids;
}

void signal_all(const std::vector<pid_t>& pids, int signal) {
  for (pid_t pid : pids)
    if (pid > 0) ::kill(pid, signal);
}

// Waiting for the ranks: the first failure stops the rest (SIGTERM: they checkpoint or exit; SIGKILL after a grace),
// a signal to the launcher is forwarded once, a second one kills them at once.
class Supervisor {
 public:
  explicit Supervisor(std::vector<pid_t> pids) : pids_(std::move(pids)), running_(static_cast<int>(pids_.size())) {}

  LaunchOutcome wait() {
    while (running_ > 0) {
      int status = 0;
      const pid_t done = ::waitpid(-1, &status, WNOHANG);
      if (done > 0) {
        reap(done, status);
        continue;
      }
      if (done < 0 && errno != EINTR && errno != ECHILD)
        throw Error(std::string("--nproc: waitpid: ") + std::strerror(errno));
      watch_signals();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return {failures_, forwarded_};
  }

 private:
  static constexpr double kGraceSec = 60.0;  // for the survivors' checkpoint and exit

  void reap(pid_t done, int status) {
    const auto it = std::find(pids_.begin(), pids_.end(), done);
    if (it == pids_.end()) return;
    const int rank = static_cast<int>(it - pids_.begin());
    *it = -1;
    --running_;
    if (exit_code_of(status) == 0) return;
    failures_.push_back({rank, exit_code_of(status), !WIFEXITED(status), describe_status(status)});
    if (failures_.size() > 1 || forwarded_) return;  // after a requested stop the ranks are saving their checkpoint
    fmt::print(stderr, "mpt --nproc {}: rank {} {}; stopping the other ranks\n", pids_.size(), rank,
               describe_status(status));
    signal_all(pids_, SIGTERM);
    stopping_since_ = std::chrono::steady_clock::now();
  }

  void watch_signals() {
    if (g_forward_signal && !forwarded_) {
      signal_all(pids_, g_forward_signal);
      forwarded_ = true;
      stopping_since_ = std::chrono::steady_clock::now();
    }
    if (g_signals >= 2) signal_all(pids_, SIGKILL);  // a second Ctrl-C: stop now, as it does for a single process
    const double stopping = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopping_since_).count();
    if ((!failures_.empty() || forwarded_) && stopping > kGraceSec) signal_all(pids_, SIGKILL);
  }

  std::vector<pid_t> pids_;
  int running_;
  std::vector<RankExit> failures_;
  bool forwarded_ = false;
  std::chrono::steady_clock::time_point stopping_since_{};
};

}  // namespace

LaunchOutcome launch_local_workers(int nproc, const std::vector<std::string>& args) {
  MPT_CHECK(nproc >= 1 && !args.empty(), "launch_local_workers needs workers and a program");
  const int port = free_local_port();
  g_forward_signal = 0;
  g_signals = 0;
  auto previous_int = std::signal(SIGINT, remember_signal);
  auto previous_term = std::signal(SIGTERM, remember_signal);
  LaunchOutcome outcome = Supervisor(start_ranks(args, rank_environments(nproc, port))).wait();
  std::signal(SIGINT, previous_int);
  std::signal(SIGTERM, previous_term);
  return outcome;
}

}  // namespace mpt::distributed
