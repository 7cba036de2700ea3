// mpt's two kinds of failure: mpt::Error for user and I/O mistakes (a message, a hint, an exit code),
// and MPT_CHECK for broken invariants, which stays on in Release builds.
#pragma once

#include <stdexcept>
#include <string>

namespace mpt {

// Exit codes are a contract with scripts and cron (see README "Exit codes").
enum ExitCode : int {
  kExitOk = 0,
  kExitRunFailed = 1,  // I/O error, divergence, a crash caught at the top
  kExitUsage = 2,      // bad command line or spec
  kExitVerdictFailed = 3,
  kExitLocked = 75,
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, int exit_code = kExitRunFailed)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// A spec, override or command-line mistake: exits with the usage code.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(message, kExitUsage) {}
};

[[noreturn]] void check_failed(const char* condition, const char* file, int line, const std::string& message);

}  // namespace mpt

#define MPT_CHECK(condition, message)                                                 \
  do {                                                                                \
    if (!(condition)) ::mpt::check_failed(#condition, __FILE__, __LINE__, (message)); \
  } while (false)
