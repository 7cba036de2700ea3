// See dir_lock.h.
#include "common/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "common/error.h"

namespace mpt {

DirectoryLock::DirectoryLock(const std::string& folder, const std::string& holder) {
  const std::string path = folder + "/.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char recorded[512] = {};
    const ssize_t n = ::pread(fd_, recorded, sizeof recorded - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (error != EWOULDBLOCK) throw Error("cannot lock " + path + ": " + std::strerror(error));
    std::string who = n > 0 ? std::string(recorded, static_cast<size_t>(n)) : "an unknown process";
    while (!who.empty() && (who.back() == '\n' || who.back() == '\0')) who.pop_back();
    throw Error("another " + holder + " holds " + path + " (" + who + "); this invocation does nothing", kExitLocked);
  }
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  char started[64] = "?";
  const std::time_t now = std::time(nullptr);
  std::strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%S%z", std::localtime(&now));
  const std::string who = "pid " + std::to_string(::getpid()) + " on " + host + ", started " + started + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, who.data(), who.size(), 0) < 0) {
    // The lock itself holds; only the holder's description is missing.
  }
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // closing drops the flock
}

}  // namespace mpt
