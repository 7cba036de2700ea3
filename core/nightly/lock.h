// One night at a time: an exclusive flock on ROOT/.lock. The kernel drops the lock when its holder dies, so a
// lock left by a killed process never blocks the next night; the file records who holds it for the message.
#pragma once

#include <string>

namespace mpt::nightly {

class RootLock {
 public:
  // Takes the lock or throws mpt::Error with kExitLocked naming the holder (pid, start time, host).
  explicit RootLock(const std::string& root);
  ~RootLock();
  RootLock(const RootLock&) = delete;
  RootLock& operator=(const RootLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace mpt::nightly
