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

LaunchOutcome launch_local_workers(int nproc, const std::vector<std::string>& args) {
  MPT_CHECK(nproc >= 1 && !args.empty(), "launch_local_workers needs workers and a program");
  const int port = free_local_port();
  // Each rank's argv and environment are built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> owned_args = args;
  std::vector<char*> argv;
  for (auto& arg : owned_args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const std::vector<std::string> ours = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                         "MASTER_PORT"};
  std::vector<std::string> inherited;
  for (char** entry = environ; *entry; ++entry) {
    const std::string variable = *entry;
    const std::string name = variable.substr(0, variable.find('='));
    if (std::find(ours.begin(), ours.end(), name) == ours.end()) inherited.push_back(variable);
  }
  std::vector<std::vector<std::string>> environments(static_cast<size_t>(nproc), inherited);
  std::vector<std::vector<char*>> envps(static_cast<size_t>(nproc));
  for (int rank = 0; rank < nproc; ++rank) {
    auto& environment = environments[static_cast<size_t>(rank)];
    for (const auto& [name, value] :
         std::vector<std::pair<std::string, int>>{{"RANK", rank}, {"WORLD_SIZE", nproc}, {"LOCAL_RANK", rank},
                                                  {"LOCAL_WORLD_SIZE", nproc}, {"MASTER_PORT", port}})
      environment.push_back(name + "=" + std::to_string(value));
    environment.push_back("MASTER_ADDR=127.0.0.1");
    for (auto& variable : environment) envps[static_cast<size_t>(rank)].push_back(variable.data());
    envps[static_cast<size_t>(rank)].push_back(nullptr);
  }

  g_forward_signal = 0;
  g_signals = 0;
  auto previous_int = std::signal(SIGINT, remember_signal);
  auto previous_term = std::signal(SIGTERM, remember_signal);
  std::vector<pid_t> pids(static_cast<size_t>(nproc), -1);
  for (int rank = 0; rank < nproc; ++rank) {
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
      ::execve(argv[0], argv.data(), envps[static_cast<size_t>(rank)].data());
      ::_exit(127);
    }
    pids[static_cast<size_t>(rank)] = pid;
  }

  // Wait for all; the first failure stops the rest (SIGTERM: they checkpoint-or-exit; SIGKILL after a grace).
  constexpr double kGraceSec = 60.0;  // for the survivors' checkpoint and exit
  int running = nproc;
  std::vector<RankExit> failures;
  bool forwarded = false;
  std::chrono::steady_clock::time_point stopping_since{};
  while (running > 0) {
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, WNOHANG);
    if (done > 0) {
      const auto it = std::find(pids.begin(), pids.end(), done);
      if (it == pids.end()) continue;
      const int rank = static_cast<int>(it - pids.begin());
      *it = -1;
      --running;
      if (exit_code_of(status) == 0) continue;
      failures.push_back({rank, exit_code_of(status), !WIFEXITED(status), describe_status(status)});
      if (failures.size() == 1) {
        if (!forwarded) {  // a failure, not a requested stop (whose ranks are still saving their checkpoint)
          fmt::print(stderr, "mpt --nproc {}: rank {} {}; stopping the other ranks\n", nproc, rank,
                     describe_status(status));
          for (pid_t other : pids)
            if (other > 0) ::kill(other, SIGTERM);
          stopping_since = std::chrono::steady_clock::now();
        }
      }
      continue;
    }
    if (done < 0 && errno != EINTR && errno != ECHILD) throw Error(std::string("--nproc: waitpid: ") + std::strerror(errno));
    if (g_forward_signal && !forwarded) {
      for (pid_t pid : pids)
        if (pid > 0) ::kill(pid, g_forward_signal);
      forwarded = true;
      stopping_since = std::chrono::steady_clock::now();
    }
    if (g_signals >= 2)  // a second Ctrl-C: stop now, as it does for a single process
      for (pid_t pid : pids)
        if (pid > 0) ::kill(pid, SIGKILL);
    if ((!failures.empty() || forwarded) &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - stopping_since).count() > kGraceSec)
      for (pid_t pid : pids)
        if (pid > 0) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::signal(SIGINT, previous_int);
  std::signal(SIGTERM, previous_term);
  return {failures, forwarded};
}

}  // namespace mpt::distributed
