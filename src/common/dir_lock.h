// One writer per folder: an exclusive flock on FOLDER/.lock, held for the owner's lifetime. The kernel drops the
// lock when its holder dies, so a lock left by a killed process never blocks the next writer; the file records
// who holds it for the message. Run directories (mpt train) and nightly roots take one.
#pragma once

#include <string>

namespace mpt {

class DirectoryLock {
 public:
  // Takes the lock or throws mpt::Error with kExitLocked naming the holder (pid, start time, host). `holder` says
  // what kind of process holds such a lock ("mpt train", "mpt nightly") in that message.
  DirectoryLock(const std::string& folder, const std::string& holder);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace mpt
